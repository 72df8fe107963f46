"""The oci:// backend: the real oci SDK (signing with a real, encrypted RSA key) against the loopback OCI Object
Storage server, plus the fault proxy."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError
from streaming_core.storage.facade import clear_backend_cache, download_file, get_backend, list_objects, upload_file
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.oci_server import OciObjectStorageServer
from tests.fixtures.servers import OciConfig
from tests.fixtures.storage_contract import FAST, Harness, StorageContract, unique

pytestmark = pytest.mark.slow

BUCKET = 'streaming-oci-contract'


@pytest.fixture(scope='module')
def oci_bucket(oci_server: OciObjectStorageServer) -> str:
    oci_server.create_bucket(BUCKET)
    return BUCKET


def _key_line(config: OciConfig) -> str:
    with open(config.key_file) as handle:
        return handle.read().splitlines()[5]


@pytest.fixture
def harness(oci_config: OciConfig, oci_bucket: str, cloud_env: pytest.MonkeyPatch) -> Harness:
    options = oci_config.options
    return Harness('oci', f'oci://{BUCKET}/{unique("run")}', options, oci_config.server.url,
                   lambda url: {**options, 'service_endpoint': url}, missing_root='oci://no-such-bucket@testns/run',
                   secrets=[oci_config.passphrase, _key_line(oci_config)], loggers=['streaming_oci'])


class TestOciContract(StorageContract):
    """Every contract test, on the loopback OCI server."""


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


def test_namespace_from_the_url_option_or_api(oci_config: OciConfig, oci_bucket: str, tmp_path: Any,
                                              fault_proxy: Callable[[str], FaultProxy], cloud_env: pytest.MonkeyPatch,
                                              fresh: None) -> None:
    proxy = fault_proxy(oci_config.server.url)
    options = {**oci_config.options, 'service_endpoint': proxy.url}
    root = unique('ns')
    _put(tmp_path, f'oci://{BUCKET}@testns/{root}/a', b'explicit namespace', options)
    assert proxy.count(path='^/n/?$') == 0
    assert _get(tmp_path, f'oci://{BUCKET}/{root}/a', options) == b'explicit namespace'
    assert _get(tmp_path, f'oci://{BUCKET}/{root}/a', options) == b'explicit namespace'
    assert proxy.count(path='^/n/?$') == 1, 'the namespace is asked once per process'
    proxy.clear()
    assert _get(tmp_path, f'oci://{BUCKET}/{root}/a', {**options, 'namespace': 'testns'}) == b'explicit namespace'
    assert proxy.count(path='^/n/?$') == 0
    with pytest.raises(RemoteNotFoundError, match='bucket does not exist'):
        _get(tmp_path, f'oci://{BUCKET}@otherns/{root}/a', options)


def test_listing_follows_pages(oci_config: OciConfig, oci_bucket: str, tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                               fresh: None) -> None:
    root = f'oci://{BUCKET}@testns/{unique("pages")}'
    for i in range(7):
        _put(tmp_path, f'{root}/f{i}', b'x', oci_config.options)
    oci_config.server.page_size = 2
    try:
        listed = list_objects(root + '/', options=oci_config.options, timeout=10)
    finally:
        oci_config.server.page_size = 1000
    assert listed == [f'{root}/f{i}' for i in range(7)]


def test_config_file_and_profile_from_the_environment(oci_config: OciConfig, oci_bucket: str, tmp_path: Any,
                                                      cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('OCI_CONFIG_FILE', oci_config.config_file)
    cloud_env.setenv('OCI_CONFIG_PROFILE', oci_config.profile)
    cloud_env.setenv('OCI_SERVICE_ENDPOINT', oci_config.server.url)
    url = f'oci://{BUCKET}/{unique("env")}/file'
    _put(tmp_path, url, b'configured by environment', None)
    assert _get(tmp_path, url, None) == b'configured by environment'


def test_settings_from_oci_cli_variables(oci_config: OciConfig, oci_bucket: str, tmp_path: Any,
                                         cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('OCI_CONFIG_FILE', str(tmp_path / 'no-config-here'))
    cloud_env.setenv('OCI_CLI_USER', 'ocid1.user.oc1..envuser')
    cloud_env.setenv('OCI_CLI_TENANCY', 'ocid1.tenancy.oc1..envtenancy')
    cloud_env.setenv('OCI_CLI_FINGERPRINT', oci_config.fingerprint)
    cloud_env.setenv('OCI_CLI_REGION', 'us-phoenix-1')
    cloud_env.setenv('OCI_CLI_KEY_FILE', oci_config.key_file)
    cloud_env.setenv('OCI_CLI_PASSPHRASE', oci_config.passphrase)
    options = {'service_endpoint': oci_config.server.url}
    url = f'oci://{BUCKET}/{unique("cli-env")}/file'
    _put(tmp_path, url, b'from OCI_CLI_*', options)
    assert _get(tmp_path, url, options) == b'from OCI_CLI_*'


def test_config_dict_option(oci_config: OciConfig, oci_bucket: str, tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                            fresh: None) -> None:
    config = {'user': 'ocid1.user.oc1..dictuser', 'tenancy': 'ocid1.tenancy.oc1..t', 'region': 'eu-frankfurt-1',
              'fingerprint': oci_config.fingerprint, 'key_file': oci_config.key_file,
              'pass_phrase': oci_config.passphrase}
    options = {'config': config, 'service_endpoint': oci_config.server.url}
    url = f'oci://{BUCKET}/{unique("dict")}/file'
    _put(tmp_path, url, b'from a dict', options)
    assert _get(tmp_path, url, options) == b'from a dict'


def test_missing_configuration_says_how_to_configure(tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                                                     fresh: None) -> None:
    cloud_env.setenv('OCI_CONFIG_FILE', str(tmp_path / 'absent'))
    with pytest.raises(PermanentStorageError, match='OCI_CLI_USER'):
        _get(tmp_path, 'oci://b@ns/key', None, retries=3)


def test_wrong_passphrase_is_permanent_and_not_echoed(oci_config: OciConfig, oci_bucket: str, tmp_path: Any,
                                                      cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    wrong = f'wrong-passphrase-{uuid.uuid4().hex}'
    config = {'user': 'ocid1.user.oc1..u', 'tenancy': 'ocid1.tenancy.oc1..t', 'region': 'us-ashburn-1',
              'fingerprint': oci_config.fingerprint, 'key_file': oci_config.key_file, 'pass_phrase': wrong}
    with pytest.raises(PermanentStorageError) as info:
        _get(tmp_path, f'oci://{BUCKET}@testns/x', {'config': config, 'service_endpoint': oci_config.server.url})
    assert wrong not in str(info.value) and oci_config.passphrase not in str(info.value)


def test_unauthenticated_is_permanent_and_not_retried(oci_config: OciConfig, oci_bucket: str, tmp_path: Any,
                                                      cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    url = f'oci://{BUCKET}@testns/{unique("auth")}'
    _put(tmp_path, url, b'x', oci_config.options)
    before = len(oci_config.server.requests)
    oci_config.server.authorized_key_ids = {'ocid1.tenancy.oc1..other/ocid1.user.oc1..other/00:00'}
    try:
        with pytest.raises(PermanentStorageError, match='401'):
            _get(tmp_path, url, oci_config.options, retries=3)
    finally:
        oci_config.server.authorized_key_ids = None
    assert len(oci_config.server.requests) - before == 1


def test_invalid_urls_and_options(oci_config: OciConfig, tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                                  fresh: None) -> None:
    with pytest.raises(PermanentStorageError, match='names no bucket'):
        _get(tmp_path, 'oci://@ns/key', oci_config.options)
    with pytest.raises(PermanentStorageError, match='names no object'):
        _get(tmp_path, 'oci://bucket@ns/', oci_config.options)
    with pytest.raises(PermanentStorageError, match='auth'):
        get_backend('oci://b/k', {'auth': 'password'})
    from streaming_oci import parse_oci_url
    assert parse_oci_url('oci://b@ns/a/b.bin', need_key=True) == ('b', 'ns', 'a/b.bin')
    assert parse_oci_url('oci://b/prefix', need_key=False) == ('b', None, 'prefix')
