"""Ranged reads and listings with sizes/etags on s3:// against moto's S3 server on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from streaming_core.errors import RemoteNotFoundError, StorageError
from streaming_core.storage.facade import clear_backend_cache, get_backend, list_with_stats, read_range
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.servers import RunningServer

pytestmark = pytest.mark.slow

BUCKET = 'streaming-ranges'
DATA = bytes(range(256)) * 64


@pytest.fixture
def s3(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    import boto3
    client = boto3.client('s3', endpoint_url=moto_server.url, aws_access_key_id='testing',
                          aws_secret_access_key='testing', region_name='us-east-1')
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    clear_backend_cache()
    options = {'endpoint_url': moto_server.url, 'aws_access_key_id': 'testing', 'aws_secret_access_key': 'testing',
               'region': 'us-east-1'}
    return client, options


def test_ranges(s3: tuple[Any, dict[str, Any]]) -> None:
    client, options = s3
    key = f'r/{uuid.uuid4().hex}/obj.bin'
    client.put_object(Bucket=BUCKET, Key=key, Body=DATA)
    url = f's3://{BUCKET}/{key}'
    assert read_range(url, 100, 1000, options=options) == DATA[100:1100]
    assert read_range(url, len(DATA) - 10, 1000, options=options) == DATA[-10:]
    assert read_range(url, len(DATA) + 10, 10, options=options) == b''
    assert get_backend(url, options).read_range(url, 0, 3, timeout=10) == DATA[:3]
    with pytest.raises(RemoteNotFoundError, match='missing.bin'):
        read_range(f's3://{BUCKET}/r/missing.bin', 0, 4, options=options, retries=0)


def test_an_answer_for_another_range_is_retried_never_returned(s3: tuple[Any, dict[str, Any]],
                                                                moto_server: RunningServer,
                                                                fault_proxy: Callable[[str], FaultProxy]) -> None:
    client, options = s3
    key = f'r/{uuid.uuid4().hex}/obj.bin'
    client.put_object(Bucket=BUCKET, Key=key, Body=DATA)
    url = f's3://{BUCKET}/{key}'
    proxy = fault_proxy(moto_server.url)  # forwards the GET for other bytes; moto's Content-Range says which
    options = {**options, 'endpoint_url': proxy.url}
    proxy.wrong_range(1, method='GET')
    assert read_range(url, 500, 8, options=options, initial_backoff=0.01) == DATA[500:508]
    assert proxy.count(method='GET', fault='range') == 1 and proxy.count(method='GET') == 2
    proxy.wrong_range(None, method='GET')
    with pytest.raises(StorageError, match='500-507'):
        read_range(url, 500, 8, options=options, retries=1, initial_backoff=0.01)
    proxy.clear()
    assert read_range(url, len(DATA) - 4, 8, options=options) == DATA[-4:]  # short at the end: the end


def test_listing_with_sizes_and_etags(s3: tuple[Any, dict[str, Any]]) -> None:
    client, options = s3
    root = f'l/{uuid.uuid4().hex}'
    client.put_object(Bucket=BUCKET, Key=f'{root}/a.bin', Body=b'12345')
    client.put_object(Bucket=BUCKET, Key=f'{root}/sub/b.bin', Body=b'1')
    found = list_with_stats(f's3://{BUCKET}/{root}/', options=options)
    assert [item.url for item in found] == [f's3://{BUCKET}/{root}/a.bin', f's3://{BUCKET}/{root}/sub/b.bin']
    assert [item.stat.size for item in found] == [5, 1]
    assert all(item.stat.etag and item.stat.mtime for item in found)
    before = found[0].stat.identity
    client.put_object(Bucket=BUCKET, Key=f'{root}/a.bin', Body=b'54321')
    assert list_with_stats(f's3://{BUCKET}/{root}/', options=options)[0].stat.identity != before
