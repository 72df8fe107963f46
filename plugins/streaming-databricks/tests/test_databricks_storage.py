"""The dbfs: backend: the real databricks-sdk against the loopback workspace (Files API and DBFS API), plus the
fault proxy; the storage contract, multipart uploads with and without presigned URLs, throttling, a connection
dropped mid-body, paginated listings, DBFS writes, authentication and end to end with 2 DataLoader workers."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError, StorageError
from streaming_core.storage.facade import (
    download_file,
    exists,
    get_backend,
    list_objects,
    read_range,
    upload_file,
    url_scheme,
)
from tests.fixtures.databricks_server import DatabricksServer
from tests.fixtures.fault_proxy import FaultProxy
from tests.fixtures.storage_contract import FAST, Harness, StorageContract, unique

pytestmark = pytest.mark.slow

TOKEN = 'dapi-test-token-0123456789'
VOLUME = 'dbfs:///Volumes/main/default/vol'


@pytest.fixture
def harness(databricks_server: DatabricksServer, options: dict[str, Any]) -> Harness:
    return Harness('dbfs', f'{VOLUME}/{unique("run")}', options, databricks_server.url,
                   lambda url: {**options, 'host': url}, missing_root='dbfs:///Volumes/main/default/no-such-volume/run',
                   secrets=[TOKEN], loggers=['databricks', 'streaming_databricks', 'urllib3'])


class TestDatabricksVolumesContract(StorageContract):
    """Every contract test on a Unity Catalog volume of the loopback workspace."""


def _file(tmp_path: Any, size: int) -> tuple[str, bytes]:
    data = os.urandom(size)
    path = str(tmp_path / f'src-{uuid.uuid4().hex[:6]}')
    with open(path, 'wb') as handle:
        handle.write(data)
    return path, data


def _read(path: str) -> bytes:
    with open(path, 'rb') as handle:
        return handle.read()


@pytest.mark.parametrize('presigned', [True, False], ids=['presigned-parts', 'presigned-not-enabled'])
def test_large_volume_upload_in_parts_or_single_put(presigned: bool, databricks_env: pytest.MonkeyPatch,
                                                     tmp_path: Any) -> None:
    with DatabricksServer((TOKEN,), presigned=presigned) as server:
        server.create_volume('main', 'default', 'vol')
        options = {'host': server.url, 'token': TOKEN, 'multipart_threshold': 64 << 10, 'part_size': 32 << 10}
        source, data = _file(tmp_path, 200_000)
        url = f'{VOLUME}/big/file.bin'
        upload_file(source, url, options=options, timeout=10, **FAST)
        assert server.files()['/Volumes/main/default/vol/big/file.bin'] == data
        parts = server.matching(r'^PUT /presigned/upload/')
        single = server.matching(r'^PUT /api/2.0/fs/files/Volumes/main/default/vol/big/file.bin')
        if presigned:
            assert len(parts) == 7 and not single, 'seven 32 KiB parts through presigned URLs'
            assert server.matching(r'action=complete-upload')
        else:
            assert not parts and len(single) == 1, 'the SDK falls back to one PUT'
            assert server.matching(r'^POST /api/2.0/fs/create-upload-part-urls')
        download_file(url, str(tmp_path / 'back'), options=options, timeout=10)
        assert _read(str(tmp_path / 'back')) == data


def test_throttling_is_retried_with_backoff_then_explained(databricks_server: DatabricksServer,
                                                           options: dict[str, Any], tmp_path: Any) -> None:
    source, data = _file(tmp_path, 5000)
    url = f'{VOLUME}/{unique("throttled")}'
    upload_file(source, url, options=options, timeout=10)
    name = url.rsplit('/', 1)[1]
    databricks_server.throttle(2, f'GET .*{name}')
    download_file(url, str(tmp_path / 'got'), options=options, retries=2, timeout=10, **FAST)
    assert _read(str(tmp_path / 'got')) == data
    assert len(databricks_server.matching(f'GET .*{name}')) == 3
    databricks_server.throttle(None, f'GET .*{name}')
    try:
        with pytest.raises(StorageError, match='REQUEST_LIMIT_EXCEEDED') as info:
            download_file(url, str(tmp_path / 'never'), options=options, retries=1, timeout=10, **FAST)
    finally:
        databricks_server.clear()
    assert 'download_retry' in str(info.value) and not isinstance(info.value, PermanentStorageError)
    assert not os.path.exists(tmp_path / 'never')


def test_connection_dropped_mid_body_resumes_from_the_bytes_received(databricks_server: DatabricksServer,
                                                                     options: dict[str, Any], tmp_path: Any) -> None:
    source, data = _file(tmp_path, 3_000_000)
    url = f'{VOLUME}/{unique("dropped")}'
    upload_file(source, url, options=options, timeout=10)
    name = url.rsplit('/', 1)[1]
    databricks_server.drop(1, f'GET .*{name}', keep=1_000_000)
    download_file(url, str(tmp_path / 'got'), options=options, retries=0, timeout=10, expected_size=len(data))
    assert _read(str(tmp_path / 'got')) == data
    gets = databricks_server.matching(f'GET .*{name}')
    assert len(gets) == 2
    resumed = gets[1].headers.get('range', '')
    assert resumed.startswith('bytes=') and 0 < int(resumed[6:-1]) <= 1_000_000
    assert gets[1].headers.get('if-unmodified-since')


def test_listing_follows_pages_and_ranged_reads(databricks_server: DatabricksServer, options: dict[str, Any],
                                                tmp_path: Any) -> None:
    root = f'{VOLUME}/{unique("pages")}'
    source, data = _file(tmp_path, 10_000)
    names = [f'shard.{i:05}.mds' for i in range(8)] + ['sub/a.bin', 'sub/deeper/b.bin']
    for name in names:
        upload_file(source, f'{root}/{name}', options=options, timeout=10)
    databricks_server.clear()
    assert list_objects(root + '/', options=options) == sorted(f'{root}/{n}' for n in names)
    pages = databricks_server.matching(r'GET /api/2.0/fs/directories/.*page_token=')
    assert len(pages) == 2, 'nine entries at the top at three a page: two follow-up pages'
    assert list_objects(f'{root}/shard.0000', options=options) == [f'{root}/shard.{i:05}.mds' for i in range(8)]
    assert list_objects(f'{VOLUME}/{unique("nothing")}/', options=options) == []
    backend = get_backend(root, options)
    assert backend.read_range(f'{root}/sub/a.bin', 1234, 4000, timeout=10) == data[1234:5234]
    assert backend.read_range(f'{root}/sub/a.bin', 9000, 4000, timeout=10) == data[9000:]
    ranged = databricks_server.matching(r'GET .*sub/a.bin')
    assert ranged[0].headers.get('range') == 'bytes=1234-5233'


def test_dbfs_root_writes_through_the_dbfs_api(databricks_server: DatabricksServer, options: dict[str, Any],
                                              tmp_path: Any) -> None:
    root = f'dbfs:///data/{unique("dbfs")}'
    source, data = _file(tmp_path, 2_500_000)
    databricks_server.clear()
    upload_file(source, f'{root}/x/shard.bin', options=options, timeout=10)
    assert databricks_server.matching(r'POST /api/2.0/dbfs/create')
    assert len(databricks_server.matching(r'POST /api/2.0/dbfs/add-block')) == 3, '1 MiB blocks'
    assert not databricks_server.matching(r'PUT /api/2.0/fs/files')
    assert exists(f'{root}/x/shard.bin', options=options) and not exists(f'{root}/x/other', options=options)
    assert list_objects(root, options=options) == [f'{root}/x/shard.bin']
    download_file(f'{root}/x/shard.bin', str(tmp_path / 'got'), options=options, timeout=10)
    assert _read(str(tmp_path / 'got')) == data
    assert databricks_server.matching(r'GET /api/2.0/fs/files/data/'), 'reads go through the Files API'
    backend = get_backend(root, options)
    assert backend.read_range(f'{root}/x/shard.bin', 1_000_000, 1_200_000, timeout=10) == data[1_000_000:2_200_000]
    with pytest.raises(RemoteNotFoundError, match='missing.bin'):
        download_file(f'{root}/missing.bin', str(tmp_path / 'never'), options=options, timeout=10)


def test_permission_denied_on_dbfs_root_suggests_volumes(databricks_server: DatabricksServer,
                                                         options: dict[str, Any], tmp_path: Any) -> None:
    databricks_server.denied_prefixes.append('/main/')
    try:
        with pytest.raises(PermanentStorageError) as info:
            download_file('dbfs:///main/default/vol/ds/index.json', str(tmp_path / 'x'), options=options,
                          retries=3, timeout=10, **FAST)
    finally:
        databricks_server.denied_prefixes.clear()
    assert 'PERMISSION_DENIED' in str(info.value)
    assert 'dbfs:/Volumes/main/default/vol/ds/index.json' in str(info.value)
    assert len(databricks_server.matching(r'GET /api/2.0/fs/files/main/default/vol/ds/index.json')) == 1


def test_authentication_from_env_profile_and_bad_token(databricks_server: DatabricksServer,
                                                       databricks_env: pytest.MonkeyPatch, tmp_path: Any,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    from streaming_core.storage.facade import clear_backend_cache
    source, data = _file(tmp_path, 1000)
    url = f'{VOLUME}/{unique("auth")}'
    databricks_env.setenv('DATABRICKS_HOST', databricks_server.url)
    databricks_env.setenv('DATABRICKS_TOKEN', TOKEN)
    upload_file(source, url, timeout=10)
    assert exists(url, timeout=10)
    databricks_env.delenv('DATABRICKS_HOST')
    databricks_env.delenv('DATABRICKS_TOKEN')
    config = tmp_path / 'databrickscfg'
    config.write_text(f'[ws]\nhost = {databricks_server.url}\ntoken = {TOKEN}\n')
    databricks_env.setenv('DATABRICKS_CONFIG_FILE', str(config))
    clear_backend_cache()
    download_file(url, str(tmp_path / 'got'), options={'profile': 'ws'}, timeout=10)
    assert _read(str(tmp_path / 'got')) == data
    caplog.set_level(logging.DEBUG)
    wrong = 'dapi-wrong-token-987654321'
    with pytest.raises(PermanentStorageError) as info:
        download_file(url, str(tmp_path / 'never'), options={'host': databricks_server.url, 'token': wrong},
                      retries=2, timeout=10, **FAST)
    assert 'UNAUTHENTICATED' in str(info.value) and 'DATABRICKS_TOKEN' in str(info.value)
    texts = [str(info.value), repr(get_backend(url, {'host': databricks_server.url, 'token': wrong}))]
    texts += [record.getMessage() for record in caplog.records]
    assert not any(wrong in text or TOKEN in text for text in texts)


def test_urls_that_cannot_work_are_refused(options: dict[str, Any]) -> None:
    with pytest.raises(PermanentStorageError, match='one slash'):
        exists('dbfs://Volumes/main/default/vol/x', options=options)
    with pytest.raises(PermanentStorageError, match='CATALOG/SCHEMA/VOLUME'):
        exists('dbfs:///Volumes/main/x', options=options)
    with pytest.raises(PermanentStorageError, match='part_size'):
        get_backend(VOLUME, {**options, 'part_size': -1})


@pytest.mark.parametrize('form', ['dbfs:/Volumes', 'dbfs:///Volumes'])
def test_end_to_end_mds_writer_then_two_dataloader_workers(form: str, databricks_server: DatabricksServer,
                                                           options: dict[str, Any], tmp_path: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip('streaming_mds')
    from tests.fixtures.dataloader_roundtrip import write_then_stream_with_workers
    if url_scheme(f'{form}/main/default/vol/x') != 'dbfs':
        pytest.xfail('streaming_core.storage.facade.url_scheme does not yet read "dbfs:/..." (one slash) as a URL: the '
                     'core change requested with issue 18')
    remote = f'{form}/main/default/vol/{unique("e2e")}'
    write_then_stream_with_workers(remote, remote, options, str(tmp_path / 'cache'))
    assert '/' + remote.split(':', 1)[1].lstrip('/') + '/index.json' in databricks_server.files()
    remote2 = f'{form}/main/default/vol/{unique("e2e-tuple")}'
    write_then_stream_with_workers((str(tmp_path / 'kept'), remote2), remote2, options, str(tmp_path / 'cache2'))
    assert '/' + remote2.split(':', 1)[1].lstrip('/') + '/index.json' in databricks_server.files()


def test_only_an_unsatisfiable_range_reads_as_the_end(databricks_server: DatabricksServer, options: dict[str, Any],
                                                      tmp_path: Any) -> None:
    """Errors whose text merely holds the word "range" (a path, a message) are errors, not the end of a file."""
    root = f'{VOLUME}/{unique("arrange")}'
    source, data = _file(tmp_path, 3000)
    url = f'{root}/orange.bin'
    upload_file(source, url, options=options, timeout=10)
    assert read_range(url, 1000, 500, options=options) == data[1000:1500]
    assert read_range(url, 3000, 500, options=options, retries=0) == b''  # the real 416: the end
    with pytest.raises(RemoteNotFoundError):  # "... not found" on a path holding "range"
        read_range(f'{root}/no-such-orange.bin', 0, 10, options=options, retries=0)
    with pytest.raises(RemoteNotFoundError):  # the volume does not exist: its name is in the message
        read_range('dbfs:/Volumes/main/default/orange-volume/x.bin', 0, 10, options=options, retries=0)
    name = url.rsplit('/', 1)[1]
    databricks_server.error(1, f'GET .*{name}', 503, 'TEMPORARILY_UNAVAILABLE', 'Reading the byte range failed.')
    assert read_range(url, 1000, 500, options=options, retries=1, **FAST) == data[1000:1500]
    databricks_server.error(None, f'GET .*{name}', 400, 'INVALID_PARAMETER_VALUE', 'Range header out of range.')
    try:
        with pytest.raises(PermanentStorageError, match='out of range'):
            read_range(url, 1000, 500, options=options, retries=2, **FAST)
    finally:
        databricks_server.clear()


def test_a_range_answered_for_other_bytes_is_retried_never_returned(databricks_server: DatabricksServer,
                                                                    options: dict[str, Any], tmp_path: Any,
                                                                    fault_proxy: Callable[[str], FaultProxy]) -> None:
    source, data = _file(tmp_path, 3000)
    url = f'{VOLUME}/{unique("shifted")}.bin'
    upload_file(source, url, options=options, timeout=10)
    proxy = fault_proxy(databricks_server.url)
    options = {**options, 'host': proxy.url}
    proxy.wrong_range(1, method='GET', path='/api/2.0/fs/files/')
    assert read_range(url, 500, 8, options=options, **FAST) == data[500:508]
    assert proxy.count(method='GET', path='/api/2.0/fs/files/') == 2
    proxy.wrong_range(None, method='GET', path='/api/2.0/fs/files/')
    with pytest.raises(StorageError, match='500-507'):
        read_range(url, 500, 8, options=options, retries=1, **FAST)
    proxy.clear()
    assert read_range(url, len(data) - 4, 8, options=options) == data[-4:]  # short at the end: the end
