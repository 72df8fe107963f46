"""streaming-hf tests: the loopback Hub (``hub``) with a clean Hugging Face environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from streaming_hf.testing import HubServer


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[HubServer]:
    """A started loopback Hub (and CDN), ``HF_ENDPOINT`` pointing at it, no token, online; stopped after the test."""
    from streaming_core.storage.facade import clear_backend_cache
    from streaming_hf import backend
    server = HubServer(page_size=4)
    for name in [n for n in os.environ if n.startswith(backend.PIN_ENV_PREFIX)]:
        monkeypatch.delenv(name)
    for name in ('HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN', 'HF_TOKEN_PATH',
                 'HF_HUB_DISABLE_IMPLICIT_TOKEN'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'hf-home'))  # no token file of the developer's
    monkeypatch.setenv('HF_ENDPOINT', server.url)
    backend._PINS.clear()
    backend._LISTINGS.clear()
    backend._SAVED_TOKEN[0] = False  # the token huggingface_hub finds is looked up again under this HF_HOME
    clear_backend_cache()
    try:
        yield server
    finally:
        server.close()
        backend._PINS.clear()
        backend._LISTINGS.clear()
        backend._SAVED_TOKEN[0] = False
        for name in [n for n in os.environ if n.startswith(backend.PIN_ENV_PREFIX)]:
            os.environ.pop(name, None)
        clear_backend_cache()
