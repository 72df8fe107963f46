"""Fixtures of the streaming-databricks tests: the loopback Databricks workspace (Files API and DBFS API)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from streaming_core.storage.facade import clear_backend_cache
from tests.deps import require

TOKEN = 'dapi-test-token-0123456789'


@pytest.fixture(scope='session')
def databricks_server() -> Iterator[object]:
    """A workspace on loopback that accepts :data:`TOKEN`, with the volume ``/Volumes/main/default/vol``."""
    require('databricks.sdk')
    from tests.fixtures.databricks_server import DatabricksServer
    with DatabricksServer((TOKEN,)) as server:
        server.create_volume('main', 'default', 'vol')
        yield server


@pytest.fixture
def databricks_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> pytest.MonkeyPatch:
    """No Databricks variable or profile of the developer's reaches the tests; backends are created afresh."""
    for name in list(os.environ):
        if name.startswith('DATABRICKS_') or name.startswith('ARM_') or name.startswith('AZURE_'):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('DATABRICKS_CONFIG_FILE', str(tmp_path_factory.mktemp('no-databricks') / 'databrickscfg'))
    clear_backend_cache()
    yield monkeypatch
    clear_backend_cache()


@pytest.fixture
def options(databricks_server: object, databricks_env: pytest.MonkeyPatch) -> dict[str, object]:
    """``storage_options`` for the loopback workspace."""
    return {'host': databricks_server.url, 'token': TOKEN}
