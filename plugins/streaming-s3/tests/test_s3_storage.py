"""The s3:// backend against moto's S3 server on loopback (plus a fault proxy): the storage contract, S3-compatible
endpoints per stream, the reference's environment variables, unsigned access and its fallback."""

from __future__ import annotations

import os
import pickle
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError, UploadError
from streaming_core.storage.facade import clear_backend_cache, download_file, get_backend, list_objects, upload_file
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.servers import RunningServer, start_moto
from tests.fixtures.storage_contract import FAST, Harness, StorageContract, unique

pytestmark = pytest.mark.slow

BUCKET = 'streaming-contract'
KEY_ID = 'AKIAS3TESTKEY'


def _boto(endpoint: str) -> Any:
    import boto3
    return boto3.client('s3', endpoint_url=endpoint, aws_access_key_id='testing', aws_secret_access_key='testing',
                        region_name='us-east-1')


@pytest.fixture(scope='session')
def s3_bucket(moto_server: RunningServer) -> str:
    _boto(moto_server.url).create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture
def s3_options(moto_server: RunningServer, s3_bucket: str, cloud_env: pytest.MonkeyPatch) -> dict[str, Any]:
    return {'endpoint_url': moto_server.url, 'aws_access_key_id': KEY_ID, 'region': 'us-east-1',
            'aws_secret_access_key': f'S3-SECRET-{uuid.uuid4().hex}',
            'aws_session_token': f'S3-TOKEN-{uuid.uuid4().hex}'}


@pytest.fixture
def harness(moto_server: RunningServer, s3_options: dict[str, Any]) -> Harness:
    return Harness('s3', f's3://{BUCKET}/{unique("run")}', s3_options, moto_server.url,
                   lambda url: {**s3_options, 'endpoint_url': url}, missing_root='s3://no-such-bucket-here/run',
                   secrets=[s3_options['aws_secret_access_key'], s3_options['aws_session_token']],
                   loggers=['streaming_s3'])


class TestS3Contract(StorageContract):
    """Every contract test, on moto."""


@pytest.fixture
def fresh() -> Iterator[None]:
    clear_backend_cache()
    yield
    clear_backend_cache()


def _put(tmp_path: Any, url: str, data: bytes, options: dict[str, Any]) -> None:
    source = tmp_path / f'src-{uuid.uuid4().hex[:6]}'
    source.write_bytes(data)
    upload_file(str(source), url, options=options, timeout=10, **FAST)


def _get(tmp_path: Any, url: str, options: dict[str, Any], **kwargs: Any) -> bytes:
    target = tmp_path / f'dst-{uuid.uuid4().hex[:6]}'
    download_file(url, str(target), options=options, timeout=10, **FAST, **kwargs)
    return target.read_bytes()


@pytest.fixture(scope='module')
def second_moto(server_logs: str) -> Iterator[RunningServer]:
    server = start_moto(server_logs)
    yield server
    server.stop()


def test_two_endpoints_in_one_process(moto_server: RunningServer, second_moto: RunningServer, s3_bucket: str,
                                      s3_options: dict[str, Any], tmp_path: Any, fresh: None) -> None:
    _boto(second_moto.url).create_bucket(Bucket=BUCKET)
    other = {**s3_options, 'endpoint_url': second_moto.url, 'aws_secret_access_key': 'another-secret'}
    url = f's3://{BUCKET}/{unique("shared")}/same-key.bin'
    _put(tmp_path, url, b'on the first endpoint', s3_options)
    _put(tmp_path, url, b'on the second endpoint', other)
    assert _get(tmp_path, url, s3_options) == b'on the first endpoint'
    assert _get(tmp_path, url, other) == b'on the second endpoint'
    assert get_backend(url, s3_options) is not get_backend(url, other)
    assert get_backend(url, s3_options) is get_backend(url, dict(s3_options))


def test_s3_endpoint_url_environment_variable(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                              cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('S3_ENDPOINT_URL', moto_server.url)
    cloud_env.setenv('AWS_ACCESS_KEY_ID', 'testing')
    cloud_env.setenv('AWS_SECRET_ACCESS_KEY', 'testing')
    cloud_env.setenv('AWS_DEFAULT_REGION', 'us-east-1')
    url = f's3://{BUCKET}/{unique("env")}/file.bin'
    _put(tmp_path, url, b'via S3_ENDPOINT_URL', {})
    assert _get(tmp_path, url, {}) == b'via S3_ENDPOINT_URL'
    assert list_objects(url, timeout=10) == [url]


def test_unsigned_requests_carry_no_signature(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                              s3_options: dict[str, Any], fault_proxy: Callable[[str], FaultProxy],
                                              fresh: None) -> None:
    url = f's3://{BUCKET}/{unique("public")}/file.bin'
    _put(tmp_path, url, b'public data', {**s3_options, 'canned_acl': 'public-read'})
    proxy = fault_proxy(moto_server.url)
    assert _get(tmp_path, url, {'endpoint_url': proxy.url, 'unsigned': True}) == b'public data'
    assert [r for r in proxy.matching('GET') if 'authorization' in r.headers] == []


def test_400_falls_back_to_unsigned_once(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                         s3_options: dict[str, Any], fault_proxy: Callable[[str], FaultProxy],
                                         fresh: None) -> None:
    url = f's3://{BUCKET}/{unique("fallback")}/file.bin'
    _put(tmp_path, url, b'public data', {**s3_options, 'canned_acl': 'public-read'})
    proxy = fault_proxy(moto_server.url)
    proxy.fail(1, status=400, method='GET')
    assert _get(tmp_path, url, {**s3_options, 'endpoint_url': proxy.url}, retries=0) == b'public data'
    signed = ['authorization' in r.headers for r in proxy.matching('GET')]
    assert signed == [True, False]

    proxy.clear()
    proxy.fail(1, status=400, method='GET')
    clear_backend_cache()
    with pytest.raises(PermanentStorageError, match='400'):
        _get(tmp_path, url, {**s3_options, 'endpoint_url': proxy.url, 'unsigned_fallback': False}, retries=2)
    assert proxy.count(method='GET') == 1


def test_a_400_never_makes_a_write_anonymous_nor_sticks(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                                       s3_options: dict[str, Any],
                                                       fault_proxy: Callable[[str], FaultProxy], fresh: None) -> None:
    """One 400 (an expired token) on an upload used to retry it unsigned and leave the backend unsigned for good:
    later uploads went anonymous and its existence checks were denied. A write is never retried unsigned, and after
    a read's fallback the next read tries its credentials again."""
    url = f's3://{BUCKET}/{unique("sticky")}/file.bin'
    proxy = fault_proxy(moto_server.url)
    options = {**s3_options, 'endpoint_url': proxy.url}
    proxy.fail(1, status=400, method='PUT')
    source = tmp_path / 'private'
    source.write_bytes(b'private data')
    with pytest.raises(UploadError, match='400'):
        upload_file(str(source), url, options=options, timeout=10, retries=0, initial_backoff=0.0)
    assert all('authorization' in r.headers for r in proxy.matching('PUT'))
    _put(tmp_path, url, b'public data', {**options, 'canned_acl': 'public-read'})
    proxy.clear()
    proxy.fail(1, status=400, method='GET')
    assert _get(tmp_path, url, options, retries=0) == b'public data'
    assert _get(tmp_path, url, options, retries=0) == b'public data'
    assert ['authorization' in r.headers for r in proxy.matching('GET')] == [True, False, True]


def test_an_upload_the_store_kept_only_part_of_is_caught(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                                        s3_options: dict[str, Any],
                                                        fault_proxy: Callable[[str], FaultProxy], fresh: None) -> None:
    """A store that keeps half an upload and answers 200: the writer's check after an upload (the object exists) let
    a cut shard be committed. Its size is checked now: retried, then refused naming the object."""
    url = f's3://{BUCKET}/{unique("short")}/shard.00000.mds'
    proxy = fault_proxy(moto_server.url)
    options = {**s3_options, 'endpoint_url': proxy.url}
    source = tmp_path / 'shard'
    source.write_bytes(bytes(range(256)) * 40)
    proxy.short_upload(1)
    upload_file(str(source), url, options=options, timeout=10, retries=1, initial_backoff=0.0)  # the retry lands
    assert _get(tmp_path, url, s3_options) == source.read_bytes()
    proxy.short_upload(1)
    with pytest.raises(UploadError, match=r'shard\.00000\.mds holds 5120 bytes after the upload of 10240'):
        upload_file(str(source), url, options=options, timeout=10, retries=0, initial_backoff=0.0)


def test_no_credentials_fall_back_to_unsigned_or_say_so(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                                        s3_options: dict[str, Any], fresh: None) -> None:
    url = f's3://{BUCKET}/{unique("anon")}/file.bin'
    _put(tmp_path, url, b'anonymous read', {**s3_options, 'canned_acl': 'public-read'})
    assert _get(tmp_path, url, {'endpoint_url': moto_server.url}) == b'anonymous read'
    with pytest.raises(PermanentStorageError, match='no usable AWS credentials'):
        _get(tmp_path, url, {'endpoint_url': moto_server.url, 'unsigned_fallback': False})


def test_requester_pays_and_canned_acl_headers(moto_server: RunningServer, s3_bucket: str, tmp_path: Any,
                                               s3_options: dict[str, Any], fault_proxy: Callable[[str], FaultProxy],
                                               cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    proxy = fault_proxy(moto_server.url)
    options = {**s3_options, 'endpoint_url': proxy.url}
    url = f's3://{BUCKET}/{unique("pays")}/file.bin'
    _put(tmp_path, url, b'x', {**options, 'requester_pays': True, 'canned_acl': 'public-read'})
    put = proxy.matching('PUT')[-1]
    assert put.headers.get('x-amz-request-payer') == 'requester'
    assert put.headers.get('x-amz-acl') == 'public-read'
    assert not any(name.startswith('x-amz-checksum-') for name in put.headers), 'custom endpoints skip new checksums'

    proxy.clear()
    cloud_env.setenv('MOSAICML_STREAMING_AWS_REQUESTER_PAYS', f'other-bucket,{BUCKET}')
    cloud_env.setenv('S3_CANNED_ACL', 'bucket-owner-full-control')
    clear_backend_cache()
    _put(tmp_path, url, b'y', options)
    assert _get(tmp_path, url, options) == b'y'
    assert all(r.headers.get('x-amz-request-payer') == 'requester' for r in proxy.requests)
    assert proxy.matching('PUT')[-1].headers.get('x-amz-acl') == 'bucket-owner-full-control'

    proxy.clear()
    cloud_env.setenv('MOSAICML_STREAMING_AWS_REQUESTER_PAYS', 'other-bucket')
    clear_backend_cache()
    _get(tmp_path, url, options)
    assert all('x-amz-request-payer' not in r.headers for r in proxy.requests)


def test_multipart_upload_above_the_threshold(harness: Harness, tmp_path: Any, fresh: None) -> None:
    data = os.urandom(11 << 20)
    url = harness.url('big.bin')
    _put(tmp_path, url, data, {**harness.options, 'multipart_threshold': 5 << 20})
    assert _get(tmp_path, url, harness.options, expected_size=len(data)) == data


def test_path_addressing_and_invalid_options(harness: Harness, tmp_path: Any, fresh: None) -> None:
    url = harness.url('path-style.bin')
    _put(tmp_path, url, b'path', {**harness.options, 'addressing_style': 'path'})
    assert _get(tmp_path, url, harness.options) == b'path'
    with pytest.raises(PermanentStorageError, match='addressing_style'):
        get_backend(url, {'addressing_style': 'sideways'})
    with pytest.raises(PermanentStorageError, match='requester_pays'):
        get_backend(url, {'requester_pays': 5})
    with pytest.raises(PermanentStorageError, match='checksums'):
        get_backend(url, {'checksums': 'always'})
    with pytest.raises(PermanentStorageError, match='profile'):
        _get(tmp_path, url, {**harness.options, 'profile': 'no-such-profile'})


def test_invalid_urls(harness: Harness, tmp_path: Any, fresh: None) -> None:
    with pytest.raises(PermanentStorageError, match='names no bucket'):
        _get(tmp_path, 's3:///key', harness.options)
    with pytest.raises(PermanentStorageError, match='names no object'):
        _get(tmp_path, f's3://{BUCKET}', harness.options)
    with pytest.raises(PermanentStorageError, match='names no object'):
        _get(tmp_path, f's3://{BUCKET}/dir/', harness.options)


def test_missing_bucket_is_not_found(harness: Harness, tmp_path: Any, fresh: None) -> None:
    with pytest.raises(RemoteNotFoundError, match='bucket does not exist'):
        _get(tmp_path, 's3://no-such-bucket-here/key.bin', harness.options)


def test_unused_backend_pickles_and_env_is_read_at_creation(cloud_env: pytest.MonkeyPatch) -> None:
    cloud_env.setenv('S3_ENDPOINT_URL', 'http://127.0.0.1:1')
    from streaming_s3.backend import S3Backend
    backend = S3Backend()
    assert backend.endpoint_url == 'http://127.0.0.1:1'
    assert pickle.loads(pickle.dumps(backend)).endpoint_url == 'http://127.0.0.1:1'
    assert S3Backend(endpoint_url='http://127.0.0.1:2').endpoint_url == 'http://127.0.0.1:2'
