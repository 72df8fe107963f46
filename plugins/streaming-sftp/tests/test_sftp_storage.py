"""The sftp:// backend: paramiko against a real SFTP server (asyncssh) on loopback, with key and password
authentication, host-key checking, a connection dropped mid-download, fork safety and end to end with 2
DataLoader workers."""

from __future__ import annotations

import logging
import multiprocessing
import os
import uuid
from typing import Any

import pytest

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError
from streaming_core.storage.facade import download_file, exists, get_backend, list_objects, stat_object, upload_file

pytestmark = pytest.mark.slow

PASSWORD = 'sftp-pa55-w0rd-s3cr3t'
FAST = {'initial_backoff': 0.01}


def _file(tmp_path: Any, size: int) -> tuple[str, bytes]:
    data = os.urandom(size)
    path = str(tmp_path / f'src-{uuid.uuid4().hex[:6]}')
    with open(path, 'wb') as handle:
        handle.write(data)
    return path, data


def _read(path: str) -> bytes:
    with open(path, 'rb') as handle:
        return handle.read()


def _unique(prefix: str) -> str:
    return f'{prefix}-{uuid.uuid4().hex[:10]}'


def test_round_trip_exists_list_and_ranged_reads(sftp_server: Any, options: dict[str, Any], tmp_path: Any) -> None:
    root = f'/data/{_unique("rt")}'
    source, data = _file(tmp_path, 300_000)
    names = ['a/one.bin', 'a/two.bin', 'a/deeper/three.bin', 'b.bin', 'a-sibling.bin']
    for name in names:
        upload_file(source, sftp_server.url(f'{root}/{name}'), options=options, timeout=10)
    assert not [n for n in os.listdir(os.path.join(sftp_server.root, root.lstrip('/'), 'a')) if n.endswith('.tmp')]
    download_file(sftp_server.url(f'{root}/a/deeper/three.bin'), str(tmp_path / 'got'), options=options, timeout=10,
                  expected_size=len(data))
    assert _read(str(tmp_path / 'got')) == data
    assert exists(sftp_server.url(f'{root}/b.bin'), options=options)
    assert not exists(sftp_server.url(f'{root}/missing.bin'), options=options)
    assert not exists(sftp_server.url(f'{root}/a'), options=options), 'a directory is not a file'
    found = stat_object(sftp_server.url(f'{root}/b.bin'), options=options)
    assert found is not None and found.size == len(data) and found.mtime
    for absent in ('missing.bin', 'a'):  # no file, or a directory
        with pytest.raises(RemoteNotFoundError, match=absent):
            stat_object(sftp_server.url(f'{root}/{absent}'), options=options, retries=0)
    assert list_objects(sftp_server.url(f'{root}/a/'), options=options) == sorted(
        sftp_server.url(f'{root}/{n}') for n in ('a/one.bin', 'a/two.bin', 'a/deeper/three.bin'))
    assert list_objects(sftp_server.url(f'{root}/a'), options=options) == sorted(
        sftp_server.url(f'{root}/{n}') for n in names if n.startswith('a'))
    assert list_objects(sftp_server.url(f'{root}/nothing/'), options=options) == []
    backend = get_backend(sftp_server.url(root), options)
    assert backend.read_range(sftp_server.url(f'{root}/b.bin'), 1000, 5000, timeout=10) == data[1000:6000]
    assert backend.read_range(sftp_server.url(f'{root}/b.bin'), 299_000, 5000, timeout=10) == data[299_000:]
    smaller, small = _file(tmp_path, 10)
    upload_file(smaller, sftp_server.url(f'{root}/b.bin'), options=options, timeout=10)
    download_file(sftp_server.url(f'{root}/b.bin'), str(tmp_path / 'again'), options=options, timeout=10)
    assert _read(str(tmp_path / 'again')) == small, 'an upload replaces the file'


def test_missing_object_is_a_clear_error_not_retried(sftp_server: Any, options: dict[str, Any],
                                                     tmp_path: Any) -> None:
    url = sftp_server.url(f'/data/{_unique("missing")}.bin')
    sftp_server.clear()
    with pytest.raises(RemoteNotFoundError) as info:
        download_file(url, str(tmp_path / 'never'), options=options, retries=3, timeout=10, **FAST)
    assert url in str(info.value)
    assert not os.listdir(tmp_path)


def test_drop_mid_download_is_retried_on_a_new_connection(sftp_server: Any, options: dict[str, Any],
                                                          tmp_path: Any) -> None:
    name = f'/data/{_unique("drop")}.bin'
    source, data = _file(tmp_path, 3_000_000)
    upload_file(source, sftp_server.url(name), options=options, timeout=10)
    before = sftp_server.connections
    sftp_server.drop(1, name, after=1_000_000)
    download_file(sftp_server.url(name), str(tmp_path / 'got'), options=options, retries=2, timeout=10,
                  expected_size=len(data), **FAST)
    assert _read(str(tmp_path / 'got')) == data
    assert sftp_server.connections == before + 1, 'one new connection after the drop'
    for _ in range(3):
        assert exists(sftp_server.url(name), options=options)
    assert sftp_server.connections == before + 1, 'one connection per process and host'


def _child_download(url: str, options: dict[str, Any], target: str, queue: Any) -> None:
    try:
        download_file(url, target, options=options, timeout=10)
        queue.put('ok')
    except BaseException as err:  # reported to the parent
        queue.put(repr(err))


def test_a_forked_child_opens_its_own_connection(sftp_server: Any, options: dict[str, Any], tmp_path: Any) -> None:
    name = f'/data/{_unique("fork")}.bin'
    source, data = _file(tmp_path, 50_000)
    upload_file(source, sftp_server.url(name), options=options, timeout=10)
    before = sftp_server.connections
    context = multiprocessing.get_context('fork')
    queue = context.Queue()
    child = context.Process(target=_child_download, args=(sftp_server.url(name), options, str(tmp_path / 'c'), queue))
    child.start()
    assert queue.get(timeout=60) == 'ok'
    child.join(30)
    assert _read(str(tmp_path / 'c')) == data
    assert sftp_server.connections == before + 1, "the child's own connection"
    assert exists(sftp_server.url(name), options=options), "the parent's connection still works"
    assert sftp_server.connections == before + 1


def test_password_in_the_url_never_shown(sftp_server: Any, sftp_env: pytest.MonkeyPatch, tmp_path: Any,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    options = {'known_hosts_file': sftp_server.known_hosts, 'allow_agent': False, 'look_for_keys': False}
    name = f'/data/{_unique("pw")}.bin'
    source, data = _file(tmp_path, 20_000)
    upload_file(source, sftp_server.url(name, password=PASSWORD), options=options, timeout=10)
    download_file(sftp_server.url(name, password=PASSWORD), str(tmp_path / 'got'), options=options, timeout=10)
    assert _read(str(tmp_path / 'got')) == data
    wrong = 'not-the-pa55word-xyz'
    errors = []
    for url in (sftp_server.url(name, password=wrong), sftp_server.url('/data/nope', password=PASSWORD)):
        with pytest.raises((PermanentStorageError, RemoteNotFoundError)) as info:
            download_file(url, str(tmp_path / 'never'), options=options, retries=2, timeout=10, **FAST)
        errors.append(info.value)
    assert isinstance(errors[0], PermanentStorageError) and 'authentication' in str(errors[0])
    texts = [f'{e!r} {e} {getattr(e, "__notes__", "")}' for e in errors]
    texts += [record.getMessage() for record in caplog.records]
    texts.append(repr(get_backend(sftp_server.url(name), {**options, 'password': PASSWORD})))
    assert not any(secret in text for text in texts for secret in (PASSWORD, wrong))


def test_writer_and_merge_errors_never_show_the_password(sftp_env: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The writer's refusals name the remote output and a leftover object, merge_index names a partition index it
    cannot download: never with the URL's password, even one holding '@' (all of it up to the host's '@')."""
    pytest.importorskip('streaming_mds')
    from streaming_core.errors import DirectoryNotEmptyError
    from streaming_core.writing.merge import merge_index
    from streaming_mds import MDSWriter
    from tests.fixtures.sftp_server import SftpServer
    password = 'pw@with-an@sign-s3cr3t'
    with SftpServer(str(tmp_path / 'root'), str(tmp_path / 'keys'), passwords={'tester': password}) as server:
        options = {'known_hosts_file': server.known_hosts, 'allow_agent': False, 'look_for_keys': False}
        url = server.url('/data/ds', password=password)

        def write() -> None:
            with MDSWriter(out=url, columns={'id': 'int'}, size_limit=256, storage_options=options) as writer:
                for i in range(60):
                    writer.write({'id': i})

        write()
        errors = []
        with pytest.raises(DirectoryNotEmptyError, match='already holds a dataset') as info:
            write()
        errors.append(info.value)
        os.remove(os.path.join(server.root, 'data', 'ds', 'index.json'))  # a writer killed before its commit
        with pytest.raises(DirectoryNotEmptyError, match='not empty.*shard.00000') as info:
            write()
        errors.append(info.value)
        with pytest.raises(RemoteNotFoundError, match='Failed to download index.json') as info:
            merge_index([server.url('/data/none/index.json', password=password)], str(tmp_path / 'merged'),
                        storage_options=options, retries=0)
        errors.append(info.value)
    for err in errors:
        text = f'{err} {err!r} {getattr(err, "__notes__", "")}'
        assert 'sftp://***@127.0.0.1' in text
        assert not any(part in text for part in (password, 'with-an', 'sign-s3cr3t')), text


def test_unknown_host_refused_unless_trusted_for_the_process(sftp_server: Any, sftp_env: pytest.MonkeyPatch,
                                                             tmp_path: Any) -> None:
    name = f'/data/{_unique("hostkey")}.bin'
    source, data = _file(tmp_path, 1000)
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    base = {'key_filename': sftp_server.client_key_file, 'allow_agent': False, 'look_for_keys': False,
            'known_hosts_file': str(empty)}
    with pytest.raises(PermanentStorageError, match='trust_unknown_hosts') as info:
        exists(sftp_server.url(name), options=base, retries=2, **FAST)
    assert 'not in the known-hosts file' in str(info.value)
    upload_file(source, sftp_server.url(name), options={**base, 'trust_unknown_hosts': True}, timeout=10)
    assert empty.read_text() == '', 'known_hosts is never written unless asked'
    saved = tmp_path / 'saved_hosts'
    download_file(sftp_server.url(name), str(tmp_path / 'got'), timeout=10,
                  options={**base, 'known_hosts_file': str(saved), 'trust_unknown_hosts': True,
                           'save_host_keys': True})
    assert _read(str(tmp_path / 'got')) == data
    assert f'[127.0.0.1]:{sftp_server.port} ssh-ed25519 ' in saved.read_text()


def test_reference_environment_variables(sftp_server: Any, sftp_env: pytest.MonkeyPatch, tmp_path: Any) -> None:
    sftp_env.setenv('COMPOSER_SFTP_KEY_FILE', sftp_server.client_key_file)
    sftp_env.setenv('COMPOSER_SFTP_KNOWN_HOSTS_FILE', sftp_server.known_hosts)
    name = f'/data/{_unique("env")}.bin'
    source, data = _file(tmp_path, 1000)
    options = {'allow_agent': False, 'look_for_keys': False}
    upload_file(source, sftp_server.url(name), options=options, timeout=10)
    download_file(sftp_server.url(name), str(tmp_path / 'got'), options=options, timeout=10)
    assert _read(str(tmp_path / 'got')) == data


def test_invalid_urls_and_options(options: dict[str, Any]) -> None:
    with pytest.raises(PermanentStorageError, match='no host'):
        exists('sftp:///data/x', options=options)
    with pytest.raises(PermanentStorageError, match='query'):
        exists('sftp://h/data/x?a=1', options=options)
    with pytest.raises(PermanentStorageError, match='no_such_option'):
        get_backend('sftp://h/x', {**options, 'no_such_option': 1})
    with pytest.raises(PermanentStorageError, match='does not exist'):
        get_backend('sftp://h/x', {**options, 'key_filename': '/nonexistent/key'})


def test_end_to_end_mds_writer_then_two_dataloader_workers(sftp_server: Any, options: dict[str, Any],
                                                           tmp_path: Any) -> None:
    pytest.importorskip('streaming_mds')
    from tests.fixtures.dataloader_roundtrip import write_then_stream_with_workers
    remote = sftp_server.url(f'/data/{_unique("e2e")}')
    write_then_stream_with_workers(remote, remote, options, str(tmp_path / 'cache'))
    remote2 = sftp_server.url(f'/data/{_unique("e2e-tuple")}')
    write_then_stream_with_workers((str(tmp_path / 'local'), remote2), remote2, options, str(tmp_path / 'cache2'))
    assert exists(remote2 + '/index.json', options=options)


def test_a_parquet_file_rewritten_within_the_second_it_was_listed_is_never_served_stale(
        sftp_server: Any, options: dict[str, Any], tmp_path: Any) -> None:
    """An SFTP listing dates files to the second and has no etag: a same-size rewrite within the second a
    construction listed the file lists the same. A construction that lists files dated within the last 2 s waits
    until they are older, lists again and builds from that listing, so that a rewrite within their second is the
    version indexed and copied (before: the rewrite, 0.5 s after the listing, was never seen: the old rows were served
    by that job and every later construction, for good)."""
    import threading
    import time

    pq = pytest.importorskip('pyarrow.parquet')
    pa = pytest.importorskip('pyarrow')
    from streaming_core import StreamingDataset

    def write(path: str, start: int) -> None:
        pq.write_table(pa.table({'id': pa.array(range(start, start + 50), pa.int64())}), path, compression='none',
                       use_dictionary=False, write_statistics=False)

    directory = _unique('parquet-same-second')
    os.makedirs(os.path.join(sftp_server.root, 'data', directory))
    path = os.path.join(sftp_server.root, 'data', directory, 'part-0.parquet')
    remote, local = sftp_server.url(f'/data/{directory}'), str(tmp_path / 'local')
    get_backend(remote, options)  # connected before the clock starts

    def ids() -> list[int]:
        return sorted(int(s['id']) for s in StreamingDataset(remote=remote, local=local, storage_options=options,
                                                             batch_size=1, shuffle=False))

    while time.time() % 1 > 0.1:  # early in a second, so the rewrite below falls within it
        time.sleep(0.01)
    write(path, 0)
    second = os.stat(path).st_mtime_ns // 10**9
    size = os.path.getsize(path)
    first: list[Any] = []
    reader = threading.Thread(target=lambda: first.append(ids()))
    reader.start()  # lists the file within its second
    time.sleep(0.5)
    assert time.time() < second + 1
    write(path, 1000)  # within the same second, the same size
    os.utime(path, ns=(second * 10**9 + 900_000_000,) * 2)
    assert os.path.getsize(path) == size and os.stat(path).st_mtime_ns // 10**9 == second
    reader.join(60)
    assert first == [list(range(1000, 1050))]
    assert ids() == list(range(1000, 1050))
