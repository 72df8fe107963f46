"""streaming-webdataset tests: make the shared data helpers (``wds_data``) importable under importlib mode."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _tables_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the cross-process sample tables of these tests out of the system temporary directory."""
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', str(tmp_path_factory.getbasetemp() / 'wds-tables'))
