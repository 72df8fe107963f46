"""The gs:// backend on loopback: google-cloud-storage against gcp-storage-emulator (with a real service-account
key), and HMAC mode through moto's S3 API; plus the fault proxy.

The service-account key names a non-default universe domain, so google-auth signs its own JWTs (no token
endpoint) and skips its regional-access-boundary lookup: no request leaves loopback.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError
from streaming_core.storage.facade import clear_backend_cache, download_file, get_backend, list_objects, upload_file
from tests.fixtures.servers import RunningServer
from tests.fixtures.storage_contract import FAST, Harness, StorageContract, unique

pytestmark = pytest.mark.slow

BUCKET = 'streaming-gcs-contract'
UNIVERSE = 'loopback.test'


@pytest.fixture(scope='module')
def service_account(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A service-account key file (a real RSA key) in the universe ``loopback.test``; returns (path, a key line)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    info = {'type': 'service_account', 'project_id': 'streaming-test', 'private_key_id': uuid.uuid4().hex,
            'private_key': pem, 'client_email': 'tester@streaming-test.iam.gserviceaccount.com',
            'client_id': '1234567890', 'token_uri': 'http://127.0.0.1:9/token', 'universe_domain': UNIVERSE}
    path = tmp_path_factory.mktemp('gcs-sa') / 'key.json'
    path.write_text(json.dumps(info))
    return str(path), pem.splitlines()[5]


@pytest.fixture(scope='module')
def gcs_bucket(gcs_emulator: RunningServer) -> str:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    client = storage.Client(project='test', credentials=AnonymousCredentials(),
                            client_options={'api_endpoint': gcs_emulator.url})
    client.create_bucket(BUCKET)
    return BUCKET


@pytest.fixture(scope='module')
def hmac_bucket(moto_server: RunningServer) -> str:
    import boto3
    boto3.client('s3', endpoint_url=moto_server.url, aws_access_key_id='testing', aws_secret_access_key='testing',
                 region_name='us-east-1').create_bucket(Bucket=BUCKET)
    return BUCKET


@pytest.fixture(params=['service_account', 'hmac'])
def harness(request: pytest.FixtureRequest, cloud_env: pytest.MonkeyPatch) -> Harness:
    if request.param == 'hmac':
        server: RunningServer = request.getfixturevalue('moto_server')
        request.getfixturevalue('hmac_bucket')
        secret = f'GCS-HMAC-SECRET-{uuid.uuid4().hex}'
        options = {'hmac_key': 'GOOG1TESTKEY', 'hmac_secret': secret, 'endpoint': server.url}
        return Harness('gs', f'gs://{BUCKET}/{unique("run")}', options, server.url,
                       lambda url: {**options, 'endpoint': url}, missing_root='gs://no-such-bucket-gcs/run',
                       secrets=[secret], loggers=['streaming_gcs'])
    server = request.getfixturevalue('gcs_emulator')
    request.getfixturevalue('gcs_bucket')
    key_file, key_line = request.getfixturevalue('service_account')
    options = {'credentials_file': key_file, 'endpoint': server.url, 'universe_domain': UNIVERSE}
    return Harness('gs', f'gs://{BUCKET}/{unique("run")}', options, server.url,
                   lambda url: {**options, 'endpoint': url}, missing_root='gs://no-such-bucket-gcs/run',
                   upload_method='POST', upload_path=lambda name: '^/upload/', secrets=[key_line],
                   loggers=['streaming_gcs'])


class TestGcsContract(StorageContract):
    """Every contract test, in both service-account (emulator) and HMAC (moto) modes."""


@pytest.fixture
def fresh() -> Iterator[None]:
    clear_backend_cache()
    yield
    clear_backend_cache()


def _put(tmp_path: Any, url: str, data: bytes, options: dict[str, Any] | None) -> None:
    source = tmp_path / f'src-{uuid.uuid4().hex[:6]}'
    source.write_bytes(data)
    upload_file(str(source), url, options=options, timeout=10, **FAST)


def _get(tmp_path: Any, url: str, options: dict[str, Any] | None, **kwargs: Any) -> bytes:
    target = tmp_path / f'dst-{uuid.uuid4().hex[:6]}'
    download_file(url, str(target), options=options, timeout=10, **FAST, **kwargs)
    return target.read_bytes()


def test_service_account_credentials_are_made_once_and_sign_every_request(
        gcs_emulator: RunningServer, gcs_bucket: str, service_account: tuple[str, str], tmp_path: Any,
        fault_proxy: Any, cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    proxy = fault_proxy(gcs_emulator.url)
    options = {'credentials_file': service_account[0], 'endpoint': proxy.url, 'universe_domain': UNIVERSE}
    root = f'gs://{BUCKET}/{unique("once")}'
    for i in range(4):
        _put(tmp_path, f'{root}/f{i}', b'%d' % i, options)
    assert [_get(tmp_path, f'{root}/f{i}', options) for i in range(4)] == [b'%d' % i for i in range(4)]
    tokens = {r.headers.get('authorization') for r in proxy.requests}
    assert len(tokens) == 1 and tokens.pop().startswith('Bearer ')
    with pytest.raises(PermanentStorageError, match='universe domain'):
        _get(tmp_path, f'{root}/f0', {'credentials_file': service_account[0], 'endpoint': proxy.url})


def test_emulator_host_environment_variable(gcs_emulator: RunningServer, gcs_bucket: str, tmp_path: Any,
                                            cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('STORAGE_EMULATOR_HOST', gcs_emulator.url.removeprefix('http://'))
    url = f'gs://{BUCKET}/{unique("emu")}/file.bin'
    _put(tmp_path, url, b'emulated', None)
    assert _get(tmp_path, url, None) == b'emulated'
    assert list_objects(url, timeout=10) == [url]
    assert get_backend(url).mode == 'emulator'


def test_hmac_environment_takes_precedence(moto_server: RunningServer, hmac_bucket: str, gcs_emulator: RunningServer,
                                           tmp_path: Any, cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('GCS_KEY', 'GOOG1ENVKEY')
    cloud_env.setenv('GCS_SECRET', 'env-secret')
    cloud_env.setenv('STORAGE_EMULATOR_HOST', gcs_emulator.url)
    url = f'gs://{BUCKET}/{unique("hmac-env")}/file.bin'
    backend = get_backend(url, {'endpoint': moto_server.url})
    assert backend.mode == 'hmac'
    _put(tmp_path, url, b'through the S3 API', {'endpoint': moto_server.url})
    assert _get(tmp_path, url, {'endpoint': moto_server.url}) == b'through the S3 API'


def test_no_credentials_names_every_way_to_give_them(tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                                                     fresh: None) -> None:
    with pytest.raises(PermanentStorageError) as info:
        _get(tmp_path, 'gs://some-bucket/some/key', None, retries=3)
    text = str(info.value)
    for word in ('GCS_KEY', 'GCS_SECRET', 'GOOGLE_APPLICATION_CREDENTIALS', 'credentials_file', 'anonymous'):
        assert word in text


def test_bad_options_and_key_files(tmp_path: Any, cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    with pytest.raises(PermanentStorageError, match='hmac_key and hmac_secret'):
        get_backend('gs://b/k', {'hmac_key': 'only-the-key'})
    missing = str(tmp_path / 'absent.json')
    with pytest.raises(PermanentStorageError, match='absent.json'):
        _get(tmp_path, 'gs://b/k', {'credentials_file': missing})
    with pytest.raises(PermanentStorageError, match='names no object'):
        _get(tmp_path, 'gs://b/', {'anonymous': True})


def test_anonymous_access_to_a_public_bucket(gcs_emulator: RunningServer, gcs_bucket: str, tmp_path: Any,
                                             cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    url = f'gs://{BUCKET}/{unique("anon")}/file.bin'
    _put(tmp_path, url, b'public', {'endpoint': gcs_emulator.url})
    backend = get_backend(url, {'endpoint': gcs_emulator.url, 'anonymous': True})
    assert backend.mode == 'emulator'
    assert _get(tmp_path, url, {'endpoint': gcs_emulator.url, 'anonymous': True}) == b'public'


def test_missing_bucket_in_hmac_mode_is_reported(moto_server: RunningServer, hmac_bucket: str, tmp_path: Any,
                                                 cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    options = {'hmac_key': 'k', 'hmac_secret': 's', 'endpoint': moto_server.url}
    with pytest.raises(RemoteNotFoundError, match='gs://no-such-bucket-gcs/key'):
        _get(tmp_path, 'gs://no-such-bucket-gcs/key', options)
    assert not os.listdir(tmp_path)
