"""streaming-hf tests: the loopback Hub (``hub``) with a clean Hugging Face environment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streaming_hf.testing import HubServer, forget_process_state


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[HubServer]:
    """A started loopback Hub (and CDN), ``HF_ENDPOINT`` pointing at it, no token, online; stopped after the test."""
    server = HubServer(page_size=4)
    forget_process_state()
    for name in ('HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN', 'HF_TOKEN_PATH',
                 'HF_HUB_DISABLE_IMPLICIT_TOKEN'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf-home'))  # no token file of the developer's
    monkeypatch.setenv('HF_ENDPOINT', server.url)
    forget_process_state()  # the token huggingface_hub finds is looked up again under this HF_HOME
    try:
        yield server
    finally:
        server.close()
        forget_process_state()
