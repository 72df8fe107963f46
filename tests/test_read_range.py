"""Ranged reads through the storage facade: local paths, file:// URLs, HTTP with and without Range support, the
whole-file fallback for a backend without ``read_range``, and listings with sizes and modification times."""

from __future__ import annotations

import os
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from streaming_core.errors import RemoteNotFoundError, StorageError
from streaming_core.machinery.lookup import get_registry
from streaming_core.storage.facade import clear_backend_cache, list_with_stats, read_range

DATA = bytes(range(256)) * 40  # 10240 bytes


class _RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with ``Range: bytes=a-b`` support (206 / 416) and records the ranges asked."""

    protocol_version = 'HTTP/1.1'
    seen: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def do_GET(self) -> None:  # noqa: N802
        wanted = self.headers.get('Range')
        path = self.translate_path(self.path)
        if not wanted or not os.path.isfile(path):
            return super().do_GET()
        type(self).seen.append(wanted)
        with open(path, 'rb') as handle:
            data = handle.read()
        first, last = wanted.removeprefix('bytes=').split('-')
        start, end = int(first), min(int(last), len(data) - 1)
        if start >= len(data):
            self.send_response(416)
            self.send_header('Content-Range', f'bytes */{len(data)}')
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        body = data[start:end + 1]
        self.send_response(206)
        self.send_header('Content-Range', f'bytes {start}-{end}/{len(data)}')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope='module')
def range_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = str(tmp_path_factory.mktemp('range-root'))
    server = ThreadingHTTPServer(('127.0.0.1', 0), partial(_RangeHandler, directory=root))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    yield root, f'http://127.0.0.1:{server.server_address[1]}'
    server.shutdown()
    thread.join(timeout=5)
    server.server_close()


def _write(directory: str, name: str, data: bytes = DATA) -> str:
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as handle:
        handle.write(data)
    return path


@pytest.mark.parametrize('as_url', [False, True])
def test_local_ranges(tmp_path: Any, as_url: bool) -> None:
    path = _write(str(tmp_path), 'a.bin')
    url = 'file://' + path if as_url else path
    assert read_range(url, 0, 10) == DATA[:10]
    assert read_range(url, 1000, 300) == DATA[1000:1300]
    assert read_range(url, len(DATA) - 5, 100) == DATA[-5:]  # short at the end
    assert read_range(url, len(DATA) + 5, 100) == b''
    assert read_range(url, 7, 0) == b''
    with pytest.raises(RemoteNotFoundError, match='missing.bin'):
        read_range(os.path.join(str(tmp_path), 'missing.bin'), 0, 1)
    with pytest.raises(ValueError, match='start >= 0'):
        read_range(url, -1, 4)


def test_http_range_requests_fetch_only_the_range(range_server: tuple[str, str]) -> None:
    root, base = range_server
    _write(root, 'sub/r.bin')
    _RangeHandler.seen.clear()
    assert read_range(f'{base}/sub/r.bin', 4000, 96) == DATA[4000:4096]
    assert read_range(f'{base}/sub/r.bin', len(DATA) - 8, 64) == DATA[-8:]
    assert read_range(f'{base}/sub/r.bin', len(DATA) + 1, 64) == b''  # 416
    assert _RangeHandler.seen == ['bytes=4000-4095', f'bytes={len(DATA) - 8}-{len(DATA) + 55}',
                                  f'bytes={len(DATA) + 1}-{len(DATA) + 64}']
    with pytest.raises(RemoteNotFoundError, match='nope.bin'):
        read_range(f'{base}/nope.bin', 0, 4, retries=0)


def test_http_server_without_range_support_still_gives_the_range(http_server: Any) -> None:
    _write(http_server.root, 'plain.bin')
    assert read_range(f'{http_server.url}/plain.bin', 300, 50) == DATA[300:350]
    assert read_range(f'{http_server.url}/plain.bin', len(DATA) - 3, 50) == DATA[-3:]


class _FaultyRangeHandler(SimpleHTTPRequestHandler):
    """Answers ranged GETs of :data:`DATA` correctly (206), except for the next requests whose fault is queued in
    ``faults``: ``'shifted'`` (a 206 for another range, saying so in its Content-Range), ``'short'`` (a 206 for the
    first half of the range only, which is not the end of the object) or ``'cut'`` (the range ignored: a 200 with
    the whole object's Content-Length, the body cut 3 bytes past the range's start). ``'forever'`` as the last fault
    repeats the one before it."""

    protocol_version = 'HTTP/1.1'
    faults: list[str] = []
    served: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return

    def do_GET(self) -> None:  # noqa: N802
        first, last = map(int, self.headers['Range'].removeprefix('bytes=').split('-'))
        faults = type(self).faults
        fault = faults[0] if faults else 'none'
        if faults and not (len(faults) == 2 and faults[1] == 'forever'):
            faults.pop(0)
        type(self).served.append(fault)
        if fault == 'cut':
            self.send_response(200)
            self.send_header('Content-Length', str(len(DATA)))
            self.send_header('Connection', 'close')
            self.end_headers()
            self.wfile.write(DATA[:first + 3])
            self.close_connection = True
            return
        last = min(last, len(DATA) - 1)
        if fault == 'shifted':
            first, last = 0, last - first
        elif fault == 'short':
            last = first + (last - first) // 2
        body = DATA[first:last + 1]
        self.send_response(206)
        self.send_header('Content-Range', f'bytes {first}-{last}/{len(DATA)}')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def faulty_range_server() -> Iterator[str]:
    _FaultyRangeHandler.faults = []
    _FaultyRangeHandler.served = []
    server = ThreadingHTTPServer(('127.0.0.1', 0), _FaultyRangeHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{server.server_address[1]}/obj.bin'
    server.shutdown()
    thread.join(timeout=5)
    server.server_close()


@pytest.mark.parametrize('fault', ['shifted', 'short', 'cut'])
def test_http_answer_for_other_bytes_is_retried_never_returned(faulty_range_server: str, fault: str) -> None:
    url = faulty_range_server
    _FaultyRangeHandler.faults = [fault]
    assert read_range(url, 500, 8, retries=2, initial_backoff=0.01) == DATA[500:508]
    assert _FaultyRangeHandler.served == [fault, 'none']
    _FaultyRangeHandler.faults = [fault, 'forever']
    with pytest.raises(StorageError, match='500-507'):
        read_range(url, 500, 8, retries=1, initial_backoff=0.01)
    _FaultyRangeHandler.faults = []
    assert read_range(url, len(DATA) - 4, 8, retries=0) == DATA[-4:]  # short at the object's end: the end


class _NoRangeBackend:
    """A backend with only the required methods: the facade falls back to a whole-file download."""

    downloads: list[str] = []

    def __init__(self, **options: Any) -> None:
        self.root = options['root']

    def _path(self, url: str) -> str:
        return os.path.join(self.root, url.split('://', 1)[1])

    def download(self, url: str, path: str, *, timeout: float) -> None:
        type(self).downloads.append(url)
        try:
            with open(self._path(url), 'rb') as src, open(path, 'wb') as out:
                out.write(src.read())
        except FileNotFoundError:
            raise RemoteNotFoundError(f'Remote object not found: {url}') from None

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        raise NotImplementedError

    def exists(self, url: str, *, timeout: float) -> bool:
        return os.path.isfile(self._path(url))

    def list(self, url: str, *, timeout: float) -> list[str]:
        prefix = url.split('://', 1)[1]
        return sorted(f'norange://{name}' for name in os.listdir(self.root) if name.startswith(prefix))


@pytest.fixture
def norange(tmp_path: Any) -> Iterator[str]:
    registry = get_registry('storage')
    registry.add('norange', _NoRangeBackend, plugin='test_read_range')
    clear_backend_cache()
    _NoRangeBackend.downloads.clear()
    yield str(tmp_path)
    registry.remove('norange')
    clear_backend_cache()


def test_fallback_downloads_the_whole_object(norange: str) -> None:
    _write(norange, 'x.bin')
    options = {'root': norange}
    assert read_range('norange://x.bin', 2000, 24, options=options) == DATA[2000:2024]
    assert _NoRangeBackend.downloads == ['norange://x.bin']
    with pytest.raises(RemoteNotFoundError):
        read_range('norange://y.bin', 0, 4, options=options)


def test_listing_with_stats_local_and_fallback(tmp_path: Any, norange: str) -> None:
    _write(str(tmp_path), 'd/a.bin', b'12345')
    _write(str(tmp_path), 'd/b/c.bin', b'1')
    listed = list_with_stats(os.path.join(str(tmp_path), 'd'))
    assert [os.path.relpath(item.url, str(tmp_path)) for item in listed] == ['d/a.bin', 'd/b/c.bin']
    assert [item.stat.size for item in listed] == [5, 1]
    assert all(item.stat.mtime for item in listed)
    _write(norange, 'k1', b'abc')
    found = list_with_stats('norange://k', options={'root': norange})
    assert [item.url for item in found] == ['norange://k1']
    assert found[0].stat.size is None  # the backend cannot tell; the listing still names the object
