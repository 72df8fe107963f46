"""Transactional writing through the storage registry: uploads to ``file://`` and plain-path remotes and to an
in-process backend registered for a fake scheme; index.json strictly last; failures raise and never commit."""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from streaming_core.errors import UploadError
from streaming_core.hookspecs import hookimpl
from streaming_core.storage.facade import clear_backend_cache, local_path
from streaming_core.testing import registered_plugin

mds = pytest.importorskip('streaming_mds')
MDSWriter = mds.MDSWriter
COLUMNS = {'id': 'int', 'data': 'bytes'}

STATE: dict[str, Any] = {}


class DirBackend:
    """A real backend for ``dirfs://<path>``: files under ``STATE['root']``, with injectable upload failures."""

    def __init__(self, **options: Any) -> None:
        STATE['options'].append(options)

    @staticmethod
    def _path(url: str) -> str:
        return os.path.join(STATE['root'], url.split('://', 1)[1])

    def download(self, url: str, path: str, *, timeout: float) -> None:
        if not os.path.isfile(self._path(url)):
            raise FileNotFoundError(url)
        shutil.copyfile(self._path(url), path)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        with STATE['lock']:
            STATE['events'].append(('start', url.rsplit('/', 1)[1], timeout))
        action = STATE['fail'](url)
        if action == 'raise':
            raise OSError(f'injected failure uploading {url}')
        if action != 'drop':
            os.makedirs(os.path.dirname(self._path(url)), exist_ok=True)
            shutil.copyfile(path, self._path(url))
        with STATE['lock']:
            STATE['events'].append(('done', url.rsplit('/', 1)[1], timeout))

    def exists(self, url: str, *, timeout: float) -> bool:
        return os.path.isfile(self._path(url))

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        if not os.path.isfile(self._path(url)):
            raise FileNotFoundError(url)
        info = os.stat(self._path(url))
        return {'size': info.st_size, 'mtime': info.st_mtime_ns}

    def list(self, url: str, *, timeout: float) -> list[str]:
        found = []
        for dirpath, _, files in os.walk(STATE['root']):
            for name in files:
                full = 'dirfs://' + os.path.relpath(os.path.join(dirpath, name), STATE['root'])
                if full.startswith(url):
                    found.append(full)
        return sorted(found)


class DirPlugin:
    @hookimpl
    def register_storage_backends(self, registry: Any) -> None:
        registry.add('dirfs', DirBackend)


@pytest.fixture
def dirfs(tmp_path: Any) -> Iterator[dict[str, Any]]:
    STATE.clear()
    STATE.update(root=str(tmp_path / 'bucket'), events=[], options=[], lock=threading.Lock(),
                 fail=lambda url: None)
    os.makedirs(STATE['root'])
    clear_backend_cache()
    with registered_plugin(DirPlugin(), name='test-dirfs'):
        yield STATE
    clear_backend_cache()


def write(out: Any, count: int = 40, *, fail_inside: bool = False, **kwargs: Any) -> None:
    kwargs.setdefault('size_limit', 600)
    with MDSWriter(columns=COLUMNS, out=out, **kwargs) as writer:
        for i in range(count):
            if fail_inside and i == count // 2:
                raise RuntimeError('boom')
            writer.write({'id': i, 'data': bytes([i % 256]) * 100})


def read_ids(root: str) -> list[int]:
    """The ``id`` of every sample of a local dataset, read with our MDS reader."""
    from streaming_core.reading.index_file import load_index, shard_readers
    index_path = os.path.join(root, 'index.json')
    ids = []
    for reader in shard_readers(load_index(index_path), index_path):
        with reader.open([os.path.join(root, reader.parts[0][0].basename)]) as view:
            ids.extend(view[i]['id'] for i in range(len(view)))
    return ids


def listed_files(root: str) -> set[str]:
    with open(os.path.join(root, 'index.json')) as handle:
        index = json.load(handle)
    return {entry[key]['basename'] for entry in index['shards'] for key in ('raw_data', 'zip_data')
            if entry.get(key)}


# ---------------------------------------------------------------------------------------------------------------
# Successful uploads


@pytest.mark.parametrize('remote_form', ['file_url', 'plain_path'])
def test_upload_to_local_remote(remote_form: str, tmp_path: Any) -> None:
    remote = str(tmp_path / 'remote')
    out = (str(tmp_path / 'local'), f'file://{remote}' if remote_form == 'file_url' else remote)
    write(out)
    assert read_ids(remote) == list(range(40))
    assert sorted(os.listdir(remote)) == sorted(listed_files(remote) | {'index.json'})
    assert not os.path.exists(tmp_path / 'local')  # keep_local=False: every uploaded file removed


def test_keep_local(tmp_path: Any) -> None:
    remote = str(tmp_path / 'remote')
    write((str(tmp_path / 'local'), remote), keep_local=True, compression='zstd')
    assert sorted(os.listdir(tmp_path / 'local')) == sorted(os.listdir(remote))
    assert all(name.endswith('.zstd') or name == 'index.json' for name in os.listdir(remote))


def test_remote_equal_to_local_is_not_an_upload(tmp_path: Any) -> None:
    local = str(tmp_path / 'ds')
    write((local, f'file://{local}/'))
    assert read_ids(local) == list(range(40))  # keep_local=False must not delete the only copy


def test_file_url_string_is_local(tmp_path: Any) -> None:
    write(f'file://{tmp_path}/ds')
    assert read_ids(str(tmp_path / 'ds')) == list(range(40))
    assert local_path(f'file://{tmp_path}/ds') == str(tmp_path / 'ds')


def test_remote_string_uses_a_temporary_local_dir(dirfs: dict[str, Any], tmp_path: Any) -> None:
    write('dirfs://ds', storage_options={'endpoint': 'x'}, upload_timeout=7)
    remote = os.path.join(dirfs['root'], 'ds')
    assert read_ids(remote) == list(range(40))
    assert {'endpoint': 'x'} in dirfs['options']
    assert {timeout for _, _, timeout in dirfs['events']} == {7}


def test_index_is_uploaded_strictly_last(dirfs: dict[str, Any], tmp_path: Any) -> None:
    write((str(tmp_path / 'local'), 'dirfs://ds'), max_workers=4)
    events = dirfs['events']
    index_start = events.index(('start', 'index.json', 60.0))
    shard_done = [i for i, (kind, name, _) in enumerate(events) if kind == 'done' and name != 'index.json']
    assert len(shard_done) == len(listed_files(os.path.join(dirfs['root'], 'ds')))
    assert max(shard_done) < index_start
    assert events[-1][:2] == ('done', 'index.json')


def test_remote_dataset_refused_without_exist_ok(dirfs: dict[str, Any], tmp_path: Any) -> None:
    write((str(tmp_path / 'a'), 'dirfs://ds'))
    with pytest.raises(FileExistsError, match='already holds a dataset'):
        write((str(tmp_path / 'b'), 'dirfs://ds'))
    write((str(tmp_path / 'b'), 'dirfs://ds'), count=3, exist_ok=True)
    assert read_ids(os.path.join(dirfs['root'], 'ds')) == [0, 1, 2]


def test_transient_failures_are_retried(dirfs: dict[str, Any], tmp_path: Any) -> None:
    attempts: dict[str, int] = {}

    def fail_first(url: str) -> str | None:
        attempts[url] = attempts.get(url, 0) + 1
        return 'raise' if attempts[url] == 1 else None

    dirfs['fail'] = fail_first
    write((str(tmp_path / 'local'), 'dirfs://ds'), count=3, size_limit=None, retry=2)
    assert read_ids(os.path.join(dirfs['root'], 'ds')) == [0, 1, 2]
    assert set(attempts.values()) == {2}


# ---------------------------------------------------------------------------------------------------------------
# Failures never commit


def _no_index_anywhere(dirfs: dict[str, Any], local: str) -> None:
    assert not os.path.exists(os.path.join(dirfs['root'], 'ds', 'index.json'))
    assert not os.path.exists(os.path.join(local, 'index.json'))


def test_failed_shard_upload_raises_from_write(dirfs: dict[str, Any], tmp_path: Any) -> None:
    dirfs['fail'] = lambda url: 'raise' if url.endswith('shard.00001.mds') else None
    local = str(tmp_path / 'local')
    writer = MDSWriter(columns=COLUMNS, out=(local, 'dirfs://ds'), size_limit=600, retry=1)
    with pytest.raises(UploadError, match='shard.00001.mds'):
        for i in range(100000):
            writer.write({'id': i, 'data': b'x' * 100})
    with pytest.raises(UploadError, match='not committed'):
        writer.finish()
    _no_index_anywhere(dirfs, local)
    assert os.path.exists(os.path.join(local, 'shard.00001.mds'))  # the file that failed is kept locally


def test_a_failed_rewrite_says_the_old_dataset_is_gone(dirfs: dict[str, Any], tmp_path: Any) -> None:
    """exist_ok=True empties the remote's index before shards are overwritten: when the rewrite then fails, the error
    says that the old dataset is already gone, not only that the new one was not committed."""
    write('dirfs://ds', 40)
    dirfs['fail'] = lambda url: 'raise' if url.endswith('shard.00001.mds') else None
    writer = MDSWriter(columns=COLUMNS, out=(str(tmp_path / 'local'), 'dirfs://ds'), size_limit=600, retry=1,
                       exist_ok=True)
    with pytest.raises(UploadError, match='already replaced by an empty index'):
        for i in range(100000):
            writer.write({'id': i, 'data': b'x' * 100})
        writer.finish()


def test_failed_last_upload_raises_from_finish(dirfs: dict[str, Any], tmp_path: Any) -> None:
    dirfs['fail'] = lambda url: 'raise' if url.endswith('shard.00003.mds') else None
    local = str(tmp_path / 'local')
    with pytest.raises(UploadError, match='shard.00003.mds'):
        write((local, 'dirfs://ds'), count=4, size_limit=250, retry=1)
    _no_index_anywhere(dirfs, local)


def test_unconfirmed_upload_is_a_failure(dirfs: dict[str, Any], tmp_path: Any) -> None:
    dirfs['fail'] = lambda url: 'drop' if url.endswith('shard.00000.mds') else None
    local = str(tmp_path / 'local')
    with pytest.raises(UploadError, match='absent after its upload'):
        write((local, 'dirfs://ds'), count=2, retry=1)
    _no_index_anywhere(dirfs, local)


def test_failed_index_upload_leaves_no_index(dirfs: dict[str, Any], tmp_path: Any) -> None:
    dirfs['fail'] = lambda url: 'raise' if url.endswith('index.json') else None
    local = str(tmp_path / 'local')
    with pytest.raises(UploadError, match='index.json'):
        write((local, 'dirfs://ds'), retry=1)
    _no_index_anywhere(dirfs, local)


def test_exception_inside_with_commits_completed_samples(dirfs: dict[str, Any], tmp_path: Any) -> None:
    with pytest.raises(RuntimeError, match='boom'):
        write((str(tmp_path / 'local'), 'dirfs://ds'), fail_inside=True)
    remote = os.path.join(dirfs['root'], 'ds')
    assert read_ids(remote) == list(range(20))
    assert all(os.path.exists(os.path.join(remote, name)) for name in listed_files(remote))


def test_exception_inside_with_and_failed_upload_commits_nothing(dirfs: dict[str, Any], tmp_path: Any) -> None:
    dirfs['fail'] = lambda url: 'raise' if url.endswith('shard.00000.mds') else None
    local = str(tmp_path / 'local')
    with pytest.raises(RuntimeError, match='boom') as info:
        write((local, 'dirfs://ds'), fail_inside=True, retry=1, size_limit=None)  # the one shard is flushed on exit
    assert any('did not commit' in note for note in getattr(info.value, '__notes__', []))
    _no_index_anywhere(dirfs, local)


def test_local_exception_inside_with_commits_completed_samples(tmp_path: Any) -> None:
    with pytest.raises(RuntimeError):
        write(str(tmp_path / 'ds'), fail_inside=True, compression='gz')
    assert read_ids_compressed(str(tmp_path / 'ds')) == list(range(20))


def read_ids_compressed(root: str) -> list[int]:
    from streaming_core.reading.index_file import load_index, shard_readers
    from streaming_core.storage.compression import decompress
    index_path = os.path.join(root, 'index.json')
    ids = []
    for reader in shard_readers(load_index(index_path), index_path):
        raw, zipped = reader.parts[0]
        with open(os.path.join(root, zipped.basename), 'rb') as handle:
            data = decompress(reader.compression, handle.read(), raw.bytes)
        path = os.path.join(root, raw.basename)
        with open(path, 'wb') as handle:
            handle.write(data)
        with reader.open([path]) as view:
            ids.extend(view[i]['id'] for i in range(len(view)))
    return ids
