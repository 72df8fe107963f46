"""``upload_timeout`` bounds a writer aimed at an endpoint that never answers (issue 12, item 9).

A real S3 client talks to a loopback socket that accepts connections and never replies. The writer must fail
after about ``retry`` attempts of ``upload_timeout`` seconds (it used to take 183 s), with one error that says the
total time, the attempts and the per-attempt timeout.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from streaming_core.errors import UploadError
from streaming_core.storage.facade import clear_backend_cache

pytest.importorskip('streaming_s3')
mds = pytest.importorskip('streaming_mds')


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """An HTTP endpoint whose TCP connections are accepted by the kernel (listen backlog) but never answered."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(('127.0.0.1', 0))
    server.listen(64)
    clear_backend_cache()
    try:
        yield f'http://127.0.0.1:{server.getsockname()[1]}'
    finally:
        server.close()
        clear_backend_cache()


def _options(endpoint: str) -> dict[str, Any]:
    return {'endpoint_url': endpoint, 'aws_access_key_id': 'testing', 'aws_secret_access_key': 'testing',
            'region': 'us-east-1'}


def test_silent_endpoint_fails_within_retry_times_upload_timeout(silent_endpoint: str, tmp_path: Any) -> None:
    started = time.monotonic()
    with pytest.raises(UploadError) as info:
        mds.MDSWriter(out='s3://bucket/ds', columns={'id': 'int'}, storage_options=_options(silent_endpoint),
                      upload_timeout=0.5, retry=2)
    elapsed = time.monotonic() - started
    text = str(info.value)
    assert 's3://bucket/ds/index.json' in text
    assert 'gave up after 2 attempt(s) (retry=2)' in text and 'upload_timeout=0.5 s' in text
    reported = float(re.search(r'in ([0-9.]+) s in all', text).group(1))
    assert 0.9 <= reported <= elapsed + 0.05  # the message rounds to 0.1 s
    assert elapsed < 20, f'{elapsed:.1f} s: the per-attempt timeout was not honoured'
    assert text.count('upload_timeout') == 1


@pytest.fixture
def uploads_hang() -> Iterator[str]:
    """An HTTP endpoint that answers existence checks (404: nothing there) but never answers an upload."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 - the http.server naming
            self.send_response(404)
            self.send_header('Content-Length', '0')
            self.end_headers()

        def do_PUT(self) -> None:  # noqa: N802
            release.wait(60)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    clear_backend_cache()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        clear_backend_cache()


def test_failed_shard_upload_reports_its_time(uploads_hang: str, tmp_path: Any) -> None:
    """The shard uploads go through the same bound, and ``finish`` says what the failed upload cost."""
    writer = mds.MDSWriter(out=(str(tmp_path / 'local'), 's3://bucket/ds2'), columns={'id': 'int'},
                           storage_options=_options(uploads_hang), upload_timeout=0.4, retry=1, exist_ok=True)
    writer.write({'id': 1})
    with pytest.raises(UploadError) as info:
        writer.finish()
    text = str(info.value)
    assert 'shard.00000.mds' in text and 'not committed' in text
    assert 'gave up after 1 attempt(s) (retry=1)' in text and 'upload_timeout=0.4 s' in text


@pytest.mark.parametrize('value', [0, -1, 'fast', True])
def test_upload_timeout_is_validated(value: Any, tmp_path: Any) -> None:
    with pytest.raises(ValueError, match='upload_timeout must be a positive number of seconds'):
        mds.MDSWriter(out=str(tmp_path / 'o'), columns={'id': 'int'}, upload_timeout=value)
