"""The azure:// and azure-dl:// backends against Azurite's Blob service on loopback, plus the fault proxy.

Azurite serves the Blob API only. ``azure-dl`` downloads and existence checks go through the Blob endpoint (the
Data Lake SDK does that itself). Its uploads (create/append/flush) and listings (``get_paths``) need the DFS
endpoint, which Azurite lacks: against Azurite alone they fail loudly, and end to end they run through
``tests/fixtures/dfs_shim.py``, a loopback DFS endpoint that stores into Azurite's real Blob service.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, StorageError, UploadError
from streaming_core.storage.facade import (
    clear_backend_cache,
    download_file,
    exists,
    get_backend,
    list_objects,
    read_range,
    stat_object,
    upload_file,
)
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.servers import AzuriteInfo
from tests.fixtures.storage_contract import FAST, Harness, StorageContract, unique

pytestmark = pytest.mark.slow

CONTAINER = 'streaming-azure-contract'


@pytest.fixture(scope='module')
def container(azurite: AzuriteInfo) -> str:
    from azure.storage.blob import BlobServiceClient
    BlobServiceClient.from_connection_string(azurite.connection_string).create_container(CONTAINER)
    return CONTAINER


@pytest.fixture
def harness(azurite: AzuriteInfo, container: str, cloud_env: pytest.MonkeyPatch) -> Harness:
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    return Harness('azure', f'azure://{CONTAINER}/{unique("run")}', options, azurite.url,
                   lambda url: {**options, 'account_url': f'{url}/{azurite.account}'},
                   missing_root='azure://no-such-container/run', secrets=[azurite.key],
                   loggers=['streaming_azure', 'azure'])


class TestAzureContract(StorageContract):
    """Every contract test, on Azurite."""


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


def test_every_url_form_reaches_the_same_blob(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                              cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    path = f'{unique("forms")}/shard.bin'
    _put(tmp_path, f'azure://{CONTAINER}/{path}', b'one blob', options)  # the reference's upload form
    for url in (f'azure://{CONTAINER}/{path}',
                f'azure://{azurite.account}/{CONTAINER}/{path}',  # the reference's download form
                f'azure://{azurite.account}.blob.core.windows.net/{CONTAINER}/{path}'):
        assert _get(tmp_path, url, options) == b'one blob'
    assert _get(tmp_path, f'azure://{azurite.account}/{CONTAINER}/{path}',
                {**options, 'url_form': 'account'}) == b'one blob'
    prefix = path.split('/')[0]
    assert list_objects(f'azure://{CONTAINER}/{prefix}', options=options) == [f'azure://{CONTAINER}/{path}']
    assert list_objects(f'azure://{azurite.account}/{CONTAINER}/{prefix}', options=options) == [
        f'azure://{azurite.account}/{CONTAINER}/{path}']


def test_connection_string_from_the_environment(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                                cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('AZURE_STORAGE_CONNECTION_STRING', azurite.connection_string)
    url = f'azure://{CONTAINER}/{unique("cs")}/file'
    _put(tmp_path, url, b'via connection string', None)
    assert _get(tmp_path, url, None) == b'via connection string'
    assert _get(tmp_path, url, {'connection_string': azurite.connection_string}) == b'via connection string'


def test_account_name_and_key_from_the_environment(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                                   cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    cloud_env.setenv('AZURE_ACCOUNT_NAME', azurite.account)
    cloud_env.setenv('AZURE_ACCOUNT_ACCESS_KEY', azurite.key)
    options = {'endpoint': azurite.blob_endpoint}
    url = f'azure://{CONTAINER}/{unique("env")}/file'
    _put(tmp_path, url, b'via AZURE_ACCOUNT_*', options)
    assert _get(tmp_path, url.replace('azure://', f'azure://{azurite.account}/'), options) == b'via AZURE_ACCOUNT_*'


def test_a_url_naming_another_account_is_refused(azurite: AzuriteInfo, tmp_path: Any,
                                                 cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    with pytest.raises(PermanentStorageError, match="names the storage account 'otheraccount'"):
        _get(tmp_path, f'azure://otheraccount.blob.core.windows.net/{CONTAINER}/x', options)


def test_wrong_key_is_denied_without_retry_or_echo(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                                   fault_proxy: Callable[[str], FaultProxy],
                                                   cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    url = f'azure://{CONTAINER}/{unique("key")}/file'
    _put(tmp_path, url, b'x', {'account_url': azurite.blob_endpoint, 'account_key': azurite.key})
    proxy = fault_proxy(azurite.url)
    wrong = 'V1JPTkctS0VZLQ==' + uuid.uuid4().hex[:8] + '=='
    with pytest.raises(PermanentStorageError, match='403') as info:
        _get(tmp_path, url, {'account_url': f'{proxy.url}/{azurite.account}', 'account_key': wrong}, retries=3)
    assert wrong not in str(info.value)
    assert proxy.count(method='GET') == 1


def test_datalake_reads_blob_backed_objects(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                            cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    path = f'{unique("dl")}/part.bin'
    _put(tmp_path, f'azure://{CONTAINER}/{path}', b'data lake bytes', options)
    assert _get(tmp_path, f'azure-dl://{CONTAINER}/{path}', options, expected_size=15) == b'data lake bytes'
    assert exists(f'azure-dl://{CONTAINER}/{path}', options=options)
    assert not exists(f'azure-dl://{CONTAINER}/{path}.absent', options=options)
    with pytest.raises(FileNotFoundError, match=f'azure-dl://{CONTAINER}/{path}.absent'):
        _get(tmp_path, f'azure-dl://{CONTAINER}/{path}.absent', options)
    found = stat_object(f'azure-dl://{CONTAINER}/{path}', options=options)
    assert found is not None and found.size == 15 and found.etag and found.mtime
    assert callable(getattr(get_backend(f'azure-dl://{CONTAINER}/{path}', options), 'read_range', None))
    assert read_range(f'azure-dl://{CONTAINER}/{path}', 5, 4, options=options) == b'lake'
    assert read_range(f'azure-dl://{CONTAINER}/{path}', 10, 100, options=options) == b'bytes'
    assert read_range(f'azure-dl://{CONTAINER}/{path}', 20, 4, options=options) == b''
    with pytest.raises(FileNotFoundError, match=f'azure-dl://{CONTAINER}/{path}.absent'):
        stat_object(f'azure-dl://{CONTAINER}/{path}.absent', options=options, **FAST)


def test_a_range_longer_than_one_sdk_request_is_read_whole(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                                          cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    """Above the SDK's single-request size (32 MiB) a range comes in several answers: each is its own range, and
    the bytes are the range asked."""
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    data = os.urandom(1 << 20) * 34
    url = f'azure://{CONTAINER}/{unique("big")}/blob.bin'
    _put(tmp_path, url, data, options)
    assert read_range(url, 7, len(data), options=options) == data[7:]


def test_datalake_upload_without_a_dfs_endpoint_fails_loudly(azurite: AzuriteInfo, container: str, tmp_path: Any,
                                                             cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    options = {'account_url': azurite.blob_endpoint, 'account_key': azurite.key}
    source = tmp_path / 'src'
    source.write_bytes(b'x')
    with pytest.raises(UploadError):
        upload_file(str(source), f'azure-dl://{CONTAINER}/{unique("dlup")}/f', options=options, retries=0, timeout=10)
    with pytest.raises(StorageError):
        list_objects(f'azure-dl://{CONTAINER}/', options=options, retries=0)


def test_url_parsing_rules() -> None:
    from streaming_azure.urls import parse_blob_url, parse_datalake_url
    # host form: unambiguous
    loc = parse_blob_url('azure://acct.blob.core.windows.net/ctr/a/b', account=None, need_path=True)
    assert (loc.account, loc.container, loc.path) == ('acct', 'ctr', 'a/b')
    # no account configured: the netloc is the account (both of the reference's code paths)
    loc = parse_blob_url('azure://acct/ctr/a/b', account=None, need_path=True)
    assert (loc.account, loc.container, loc.path) == ('acct', 'ctr', 'a/b')
    # account configured: its name means the account form, anything else is a container
    loc = parse_blob_url('azure://acct/ctr/a/b', account='acct', need_path=True)
    assert (loc.account, loc.container, loc.path) == ('acct', 'ctr', 'a/b')
    loc = parse_blob_url('azure://ctr/a/b', account='acct', need_path=True)
    assert (loc.account, loc.container, loc.path, loc.base) == (None, 'ctr', 'a/b', 'azure://ctr/')
    loc = parse_blob_url('azure://ctr/a/b', account=None, url_form='container', need_path=True)
    assert (loc.account, loc.container, loc.path) == (None, 'ctr', 'a/b')
    loc = parse_blob_url('azure://x/ctr/a', account='acct', url_form='account', need_path=True)
    assert (loc.account, loc.container, loc.path) == ('x', 'ctr', 'a')
    with pytest.raises(PermanentStorageError, match='names no container'):
        parse_blob_url('azure://acct/', account=None, need_path=False)
    with pytest.raises(PermanentStorageError, match='names no blob'):
        parse_blob_url('azure://ctr/dir/', account='acct', need_path=True)
    with pytest.raises(PermanentStorageError, match='url_form'):
        parse_blob_url('azure://ctr/a', account='acct', url_form='sideways', need_path=True)
    loc = parse_datalake_url('azure-dl://fs/dir/file', need_path=True)
    assert (loc.account, loc.container, loc.path) == (None, 'fs', 'dir/file')
    loc = parse_datalake_url('azure-dl://fs@acct.dfs.core.windows.net/dir/file', need_path=True)
    assert (loc.account, loc.container, loc.path) == ('acct', 'fs', 'dir/file')
    with pytest.raises(PermanentStorageError, match='names no file'):
        parse_datalake_url('azure-dl://fs/', need_path=True)


def test_datalake_account_rules(cloud_env: pytest.MonkeyPatch, fresh: None) -> None:
    backend = get_backend('azure-dl://fs/x', {'credential': 'anonymous'})
    # the reference's fallback: the filesystem name is the account when nothing else names one
    assert backend._locate('azure-dl://myfs/x', True)[1] == 'myfs'
    assert backend.settings.service_url('acct', 'dfs') == 'https://acct.dfs.core.windows.net'
    named = get_backend('azure-dl://fs/x', {'account': 'acct', 'credential': 'anonymous'})
    assert named._locate('azure-dl://myfs/x', True)[1] == 'acct'
    assert named._locate('azure-dl://myfs@other.dfs.core.windows.net/x', True)[1] == 'other'
    blob = get_backend('azure://c/x', {'account_url': 'https://acct.blob.core.windows.net', 'sas_token': 'sv=1'})
    assert blob.settings.account == 'acct'
    assert blob.settings.service_url('acct', 'dfs') == 'https://acct.dfs.core.windows.net'
    with pytest.raises(PermanentStorageError, match='credential'):
        get_backend('azure://c/x', {'credential': 'password'})
    with pytest.raises(PermanentStorageError, match='AccountName'):
        get_backend('azure://c/x', {'connection_string': 'BlobEndpoint=http://x'})


@pytest.fixture
def dfs_shim(azurite: AzuriteInfo) -> Iterator[Any]:
    from tests.fixtures.dfs_shim import DfsShim
    shim = DfsShim(azurite.url, azurite.connection_string)
    yield shim
    shim.close()


def test_datalake_end_to_end_through_a_dfs_endpoint(azurite: AzuriteInfo, container: str, dfs_shim: Any,
                                                     tmp_path: Any, cloud_env: pytest.MonkeyPatch,
                                                     fresh: None) -> None:
    """azure-dl:// uploads (create, append, flush), listing, downloads and existence checks, end to end: the Data
    Lake calls are answered by a loopback DFS endpoint that stores into Azurite's real Blob service."""
    from tests.fixtures.storage_contract import end_to_end
    options = {'account_url': f'{dfs_shim.url}/{azurite.account}', 'account_key': azurite.key}
    root = f'azure-dl://{CONTAINER}/{unique("dle2e")}'
    source = tmp_path / 'one'
    source.write_bytes(b'data lake upload')
    upload_file(str(source), f'{root}/one.bin', options=options)
    assert exists(f'{root}/one.bin', options=options)
    assert list_objects(f'{root}/', options=options) == [f'{root}/one.bin']
    assert _get(tmp_path, f'{root}/one.bin', options, expected_size=16) == b'data lake upload'
    end_to_end(f'{root}/dataset', options, tmp_path / 'e2e')
