"""Fixtures of the streaming-sftp tests: a real SFTP server (asyncssh) on loopback with key authentication."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming_core.storage.facade import clear_backend_cache
from tests.deps import require

PASSWORD = 'sftp-pa55-w0rd-s3cr3t'


@pytest.fixture(scope='session')
def sftp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The SFTP server (user ``tester`` by key, or by :data:`PASSWORD`)."""
    require('asyncssh')
    require('paramiko')
    from tests.fixtures.sftp_server import SftpServer
    base = tmp_path_factory.mktemp('sftp')
    with SftpServer(str(base / 'root'), str(base / 'keys'), passwords={'tester': PASSWORD}) as server:
        yield server


@pytest.fixture
def sftp_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No SFTP variable of the developer's reaches the tests; backends are created afresh."""
    for name in ('COMPOSER_SFTP_KEY_FILE', 'COMPOSER_SFTP_KNOWN_HOSTS_FILE', 'SSH_AUTH_SOCK'):
        monkeypatch.delenv(name, raising=False)
    clear_backend_cache()
    yield monkeypatch
    clear_backend_cache()


@pytest.fixture
def options(sftp_server: object, sftp_env: pytest.MonkeyPatch) -> dict[str, object]:
    """``storage_options`` for key authentication against the test server."""
    return {'key_filename': sftp_server.client_key_file, 'known_hosts_file': sftp_server.known_hosts,
            'allow_agent': False, 'look_for_keys': False}

