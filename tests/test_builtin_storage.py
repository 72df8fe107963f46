"""The builtin local backend (plain paths and file:// URLs) through the storage API."""

from __future__ import annotations

import os

import pytest

from streaming_core.errors import RemoteNotFoundError, TruncatedDownloadError
from streaming_core.storage import facade as storage


@pytest.mark.parametrize('as_url', [False, True])
def test_local_backend_round_trip(tmp_path, as_url):
    remote_root = tmp_path / 'remote'
    source = tmp_path / 'source.bin'
    source.write_bytes(b'x' * 1000)
    base = f'file://{remote_root}' if as_url else str(remote_root)
    url = storage.join(base, 'a', 'b.bin')
    storage.upload_file(str(source), url)
    assert (remote_root / 'a' / 'b.bin').read_bytes() == b'x' * 1000
    assert storage.exists(url)
    assert not storage.exists(storage.join(base, 'missing'))
    listed = storage.list_objects(base)
    assert listed == [storage.join(base, 'a', 'b.bin')]
    dest = tmp_path / 'out' / 'c.bin'
    storage.download_file(url, str(dest), expected_size=1000)
    assert dest.read_bytes() == b'x' * 1000
    assert not [name for name in os.listdir(dest.parent) if name.endswith('.tmp')]


def test_local_missing_and_truncated(tmp_path):
    with pytest.raises(RemoteNotFoundError, match='missing.bin'):
        storage.download_file(str(tmp_path / 'missing.bin'), str(tmp_path / 'x'), retries=3)
    (tmp_path / 'short.bin').write_bytes(b'abc')
    with pytest.raises(TruncatedDownloadError, match='declares 10'):
        storage.download_file(str(tmp_path / 'short.bin'), str(tmp_path / 'y'), expected_size=10, retries=1,
                              initial_backoff=0.01)
    assert not (tmp_path / 'y').exists()


def test_url_helpers():
    assert storage.url_scheme('/a/b') == ''
    assert storage.url_scheme('S3://bucket/x') == 's3'
    assert storage.join('s3://bucket/root/', 'split', 'index.json') == 's3://bucket/root/split/index.json'
    assert storage.local_path('file:///tmp/a%20b') == '/tmp/a b'
    assert storage.is_remote('gs://x') and not storage.is_remote('file:///x') and not storage.is_remote('/x')
