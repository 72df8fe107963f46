"""The kept-alive connections of the ``hf://`` backend (:mod:`streaming_hf.transport`): one connection serves many
requests, a connection the server closed while idle is replaced without an error, a response closed early does not
leave its connection to the next request, and a proxy set in the environment is honoured (not bypassed)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from streaming_core.plugin_api import StorageError
from streaming_core.storage.facade import get_backend
from streaming_hf.testing import HubServer
from streaming_hf.transport import ConnectionPool

BODY = bytes(range(256)) * 1024  # 256 KiB: more than is drained on close


class _OneShot(BaseHTTPRequestHandler):
    """Answers in HTTP/1.1 without ``Connection: close``, then closes the connection anyway (as a server's idle
    timeout does between two requests)."""

    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True
    peers: list[Any] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.peers.append(self.client_address[1])
        body = BODY if self.path == '/big' else b'ok'
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = self.path != '/keep'


@pytest.fixture
def one_shot() -> Iterator[tuple[str, list[Any]]]:
    handler = type('OneShot', (_OneShot,), {'peers': []})
    server = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}', handler.peers
    finally:
        server.shutdown()
        server.server_close()


def test_a_closed_idle_connection_is_replaced(one_shot: tuple[str, list[Any]]) -> None:
    url, peers = one_shot
    pool = ConnectionPool()
    for _ in range(3):
        with pool.request('GET', url + '/close', {}, timeout=10) as answer:
            assert answer.status == 200 and answer.read() == b'ok'
    assert len(peers) == 3 and len(set(peers)) == 3  # each request found its idle connection closed: a new one
    for _ in range(3):
        with pool.request('GET', url + '/keep', {}, timeout=10) as answer:
            assert answer.read() == b'ok'
    assert len(set(peers[3:])) == 1  # kept alive: one connection for the three
    pool.close()


def test_a_response_closed_early_closes_its_connection(one_shot: tuple[str, list[Any]]) -> None:
    url, peers = one_shot
    pool = ConnectionPool()
    answer = pool.request('GET', url + '/big', {}, timeout=10)
    assert answer.read(10) == BODY[:10]
    answer.close()  # 256 KiB unread: not drained, the connection is dropped
    with pool.request('GET', url + '/keep', {}, timeout=10) as again:
        assert again.read() == b'ok'
    assert peers[0] != peers[1]
    assert 'idle' in repr(pool)


def test_hub_requests_share_connections(hub: HubServer) -> None:
    import hashlib
    files = {f'data/part-{i}.bin': hashlib.sha256(str(i).encode()).digest() * 8 for i in range(20)}
    hub.state.repo('datasets', 'me/many').push(files)
    backend = get_backend('hf://datasets/me/many')
    for name, data in files.items():
        assert backend.read_range(f'hf://datasets/me/many/{name}', 8, 16, timeout=10) == data[8:24]
    assert len(hub.state.peers) == 21 and len(set(hub.state.peers)) == 1  # the revision, then 20 reads


def test_a_proxy_in_the_environment_is_used(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    hub.state.repo('datasets', 'me/tiny').push({'a.txt': b'a'})
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    for name in ('no_proxy', 'NO_PROXY'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('http_proxy', f'http://127.0.0.1:{port}')  # nothing listens there
    with pytest.raises(StorageError, match='cannot reach the Hugging Face Hub'):
        get_backend('hf://datasets/me/tiny').read_range('hf://datasets/me/tiny/a.txt', 0, 1, timeout=5)
    assert not hub.state.requests  # the request went to the proxy, not around it
