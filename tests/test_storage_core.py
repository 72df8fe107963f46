"""streaming_core.storage.facade: URL helpers, backend caching, retries with client resets, atomic downloads with size
and hash checks, verified uploads. Real backends: the builtin local one, and a small in-process plugin (registered
through the ordinary plugin path) whose failures are scripted per call."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from streaming_core.errors import (
    HashMismatchError,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    UnknownNameError,
    UploadError,
)
from streaming_core.hookspecs import hookimpl
from streaming_core.machinery import discovery as plugins
from streaming_core.storage.facade import (
    check_location,
    check_options,
    clear_backend_cache,
    download_file,
    exists,
    get_backend,
    is_remote,
    join,
    list_objects,
    local_path,
    split_bucket_url,
    temp_name,
    upload_file,
    url_scheme,
    with_retries,
)

FAST = {'initial_backoff': 0.001}


class ScriptedBackend:
    """A ``scripted://`` backend over a local directory whose next failures are queued by the test."""

    instances: list[ScriptedBackend] = []

    def __init__(self, root: str = '', **options: Any) -> None:
        self.root = root
        self.options = options
        self.failures: list[BaseException] = []
        self.calls: list[str] = []
        self.resets = 0
        self.truncate_next = 0
        self._lock = threading.Lock()
        ScriptedBackend.instances.append(self)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state['_lock']
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _path(self, url: str) -> str:
        return os.path.join(self.root, url.split('://', 1)[1])

    def _step(self, name: str) -> None:
        with self._lock:
            self.calls.append(name)
            failure = self.failures.pop(0) if self.failures else None
        if failure is not None:
            raise failure

    def reset(self) -> None:
        self.resets += 1

    def download(self, url: str, path: str, *, timeout: float) -> None:
        self._step('download')
        source = self._path(url)
        if not os.path.exists(source):
            raise RemoteNotFoundError(f'Remote object not found: {url}')
        with open(source, 'rb') as handle:
            data = handle.read()
        if self.truncate_next:
            self.truncate_next -= 1
            data = data[:len(data) // 2]
        with open(path, 'wb') as handle:
            handle.write(data)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        self._step('upload')
        os.makedirs(os.path.dirname(self._path(url)), exist_ok=True)
        shutil.copyfile(path, self._path(url))

    def exists(self, url: str, *, timeout: float) -> bool:
        self._step('exists')
        return os.path.exists(self._path(url))

    def list(self, url: str, *, timeout: float) -> list[str]:
        self._step('list')
        prefix = self._path(url)
        found = []
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                full = os.path.join(dirpath, name)
                if full.startswith(prefix):
                    found.append('scripted://' + os.path.relpath(full, self.root))
        return found


class _Plugin:
    @hookimpl
    def register_storage_backends(self, registry: Any) -> None:
        registry.add('scripted', ScriptedBackend)


@pytest.fixture
def scripted(tmp_path: Any) -> Iterator[dict[str, Any]]:
    plugins.register_plugin(_Plugin(), name='test-scripted-storage')
    clear_backend_cache()
    ScriptedBackend.instances.clear()
    root = tmp_path / 'remote'
    root.mkdir()
    yield {'root': str(root)}
    plugins.unregister_plugin('test-scripted-storage')
    clear_backend_cache()


def _backend(options: dict[str, Any]) -> ScriptedBackend:
    backend = get_backend('scripted://x', options)
    assert isinstance(backend, ScriptedBackend)
    return backend


def test_url_helpers() -> None:
    assert url_scheme('S3://bucket/key') == 's3'
    assert url_scheme('/data/local') == '' and url_scheme('relative/dir') == ''
    assert url_scheme('azure-dl://fs/path') == 'azure-dl'
    with pytest.raises(TypeError):
        url_scheme(None)  # type: ignore[arg-type]
    assert is_remote('gs://b/k') and not is_remote('/tmp/x') and not is_remote('file:///tmp/x')
    assert not is_remote(None) and not is_remote('')
    assert join('s3://bucket/root/', 'a', '/b/', 'c.bin') == 's3://bucket/root/a/b/c.bin'
    assert join('/data', 'split', 'index.json') == os.path.join('/data', 'split', 'index.json')
    assert join('s3://bucket/root', '', None or '') == 's3://bucket/root'
    assert local_path('file:///tmp/a%20b') == '/tmp/a b' and local_path('/tmp/x') == '/tmp/x'
    assert temp_name('/d/f.bin').startswith('/d/f.bin.') and temp_name('/d/f') != temp_name('/d/f')


def test_split_bucket_url_and_check_options() -> None:
    assert split_bucket_url('s3://bucket/a/b', scheme='s3', need_key=True) == ('bucket', 'a/b')
    assert split_bucket_url('s3://bucket/a#1/b?c', scheme='s3', need_key=True) == ('bucket', 'a#1/b?c')
    assert split_bucket_url('s3://bucket', scheme='s3', need_key=False) == ('bucket', '')
    with pytest.raises(PermanentStorageError, match='names no bucket'):
        split_bucket_url('s3:///key', scheme='s3', need_key=True)
    with pytest.raises(PermanentStorageError, match='names no object'):
        split_bucket_url('s3://bucket/dir/', scheme='s3', need_key=True)
    with pytest.raises(PermanentStorageError, match='Expected a gs:// URL'):
        split_bucket_url('s3://bucket/key', scheme='gs', need_key=True)
    check_options('s3', {'region': 'x'}, {'region', 'profile'})
    with pytest.raises(PermanentStorageError, match=r"\['bogus'\].*\['profile', 'region'\]"):
        check_options('s3', {'region': 'x', 'bogus': 1}, {'region', 'profile'})


def test_unknown_scheme_names_the_distribution() -> None:
    with pytest.raises(UnknownNameError, match='s4'):
        get_backend('s4://bucket/key')


def test_backends_are_cached_per_option_set(scripted: dict[str, Any]) -> None:
    one = _backend(scripted)
    assert _backend(dict(scripted)) is one
    other = _backend({**scripted, 'flavour': 'b'})
    assert other is not one
    clear_backend_cache()
    assert _backend(scripted) is not one


def test_download_retries_transient_failures_and_resets_the_client(scripted: dict[str, Any], tmp_path: Any) -> None:
    (tmp_path / 'remote' / 'obj').write_bytes(b'payload')
    backend = _backend(scripted)
    backend.failures = [StorageError('503'), ConnectionResetError('reset')]
    target = tmp_path / 'local' / 'obj'
    download_file('scripted://obj', str(target), options=scripted, retries=2, expected_size=7, **FAST)
    assert target.read_bytes() == b'payload'
    assert backend.calls == ['download'] * 3 and backend.resets == 2
    assert sorted(os.listdir(target.parent)) == ['obj']  # no temporary files left behind


def test_not_found_and_permanent_errors_are_not_retried(scripted: dict[str, Any], tmp_path: Any) -> None:
    backend = _backend(scripted)
    with pytest.raises(RemoteNotFoundError, match='scripted://absent'):
        download_file('scripted://absent', str(tmp_path / 'x'), options=scripted, retries=5, **FAST)
    assert backend.calls == ['download'] and backend.resets == 0
    (tmp_path / 'remote' / 'obj').write_bytes(b'payload')
    backend.calls.clear()
    backend.failures = [PermanentStorageError('denied')]
    with pytest.raises(PermanentStorageError, match='denied'):
        download_file('scripted://obj', str(tmp_path / 'x'), options=scripted, retries=5, **FAST)
    assert backend.calls == ['download']
    assert not (tmp_path / 'x').exists()


def test_exhausted_retries_raise_a_storage_error_naming_the_url(scripted: dict[str, Any], tmp_path: Any) -> None:
    (tmp_path / 'remote' / 'obj').write_bytes(b'payload')
    backend = _backend(scripted)
    backend.failures = [TimeoutError('slow')] * 3
    with pytest.raises(StorageError, match=r'scripted://obj.*3 attempt'):
        download_file('scripted://obj', str(tmp_path / 'x'), options=scripted, retries=2, **FAST)
    assert backend.calls == ['download'] * 3 and backend.resets == 2


def test_size_mismatch_is_retried_then_reported(scripted: dict[str, Any], tmp_path: Any) -> None:
    (tmp_path / 'remote' / 'obj').write_bytes(b'0123456789')
    backend = _backend(scripted)
    backend.truncate_next = 1
    target = tmp_path / 'obj'
    download_file('scripted://obj', str(target), options=scripted, retries=1, expected_size=10, **FAST)
    assert target.read_bytes() == b'0123456789'
    backend.truncate_next = 5
    target.unlink()
    with pytest.raises(TruncatedDownloadError, match='5 bytes, but the index declares 10'):
        download_file('scripted://obj', str(target), options=scripted, retries=2, expected_size=10, **FAST)
    assert not target.exists() and os.listdir(tmp_path / 'remote') == ['obj']


def test_hash_is_checked_before_the_rename(scripted: dict[str, Any], tmp_path: Any) -> None:
    (tmp_path / 'remote' / 'obj').write_bytes(b'payload')
    _backend(scripted)
    good = hashlib.sha1(b'payload').hexdigest()
    target = tmp_path / 'obj'
    download_file('scripted://obj', str(target), options=scripted, expected_hash=('sha1', good), **FAST)
    assert target.read_bytes() == b'payload'
    target.write_bytes(b'previous content')
    with pytest.raises(HashMismatchError, match='sha1'):
        download_file('scripted://obj', str(target), options=scripted, retries=1, expected_hash=('sha1', '0' * 40),
                      **FAST)
    assert target.read_bytes() == b'previous content'  # a failed download never replaces the file


def test_upload_is_verified_and_failures_surface(scripted: dict[str, Any], tmp_path: Any) -> None:
    source = tmp_path / 'src.bin'
    source.write_bytes(b'data')
    backend = _backend(scripted)
    backend.failures = [StorageError('503')]
    upload_file(str(source), 'scripted://dir/src.bin', options=scripted, retries=1, **FAST)
    assert (tmp_path / 'remote' / 'dir' / 'src.bin').read_bytes() == b'data'
    assert backend.calls == ['upload', 'upload', 'exists'] and backend.resets == 1
    backend.calls.clear()
    backend.failures = [StorageError('503')] * 2
    with pytest.raises(UploadError, match=r'src\.bin to scripted://dir/again\.bin'):
        upload_file(str(source), 'scripted://dir/again.bin', options=scripted, retries=1, **FAST)
    with pytest.raises(UploadError, match='no-such-file'):
        upload_file(str(tmp_path / 'no-such-file'), 'scripted://dir/x', options=scripted, retries=3, **FAST)


def test_upload_that_vanishes_is_an_error(scripted: dict[str, Any], tmp_path: Any) -> None:
    source = tmp_path / 'src.bin'
    source.write_bytes(b'data')
    backend = _backend(scripted)

    def lose(path: str, url: str, *, timeout: float) -> None:
        backend.calls.append('upload')  # reports success, stores nothing

    backend.upload = lose  # type: ignore[method-assign]
    with pytest.raises(UploadError, match='absent after its upload'):
        upload_file(str(source), 'scripted://lost.bin', options=scripted, retries=1, **FAST)
    upload_file(str(source), 'scripted://lost.bin', options=scripted, retries=0, verify=False)


def test_exists_and_list_retry_transient_failures(scripted: dict[str, Any], tmp_path: Any) -> None:
    for name in ('a/1', 'a/2', 'b/3'):
        os.makedirs(os.path.dirname(tmp_path / 'remote' / name), exist_ok=True)
        (tmp_path / 'remote' / name).write_bytes(b'x')
    backend = _backend(scripted)
    backend.failures = [StorageError('503')]
    assert exists('scripted://a/1', options=scripted, **FAST)
    backend.failures = [StorageError('503')]
    assert list_objects('scripted://a/', options=scripted, **FAST) == ['scripted://a/1', 'scripted://a/2']
    backend.failures = [StorageError('503')] * 3
    with pytest.raises(StorageError):
        exists('scripted://a/1', options=scripted, retries=2, **FAST)


def test_with_retries_semantics() -> None:
    calls: list[int] = []
    resets: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError('transient')
        return 'done'

    assert with_retries(flaky, what='job', attempts=3, initial_backoff=0.001,
                        on_failure=lambda: resets.append(1)) == 'done'
    assert len(calls) == 3 and len(resets) == 2
    calls.clear()
    with pytest.raises(OSError) as info:
        with_retries(flaky, what='job', attempts=2, initial_backoff=0.001)
    assert 'job: failed after 2 attempts.' in getattr(info.value, '__notes__', [])
    with pytest.raises(RemoteNotFoundError):
        with_retries(lambda: (_ for _ in ()).throw(RemoteNotFoundError('gone')), what='job', attempts=5,
                     on_failure=lambda: resets.append(99))
    assert 99 not in resets
    assert with_retries(lambda: 7, what='job', attempts=0) == 7  # at least one attempt


def test_local_backend_round_trip_and_listing(tmp_path: Any) -> None:
    clear_backend_cache()
    remote = tmp_path / 'remote'
    source = tmp_path / 'src.bin'
    source.write_bytes(b'local bytes')
    upload_file(str(source), str(remote / 'x' / 'a.bin'))
    upload_file(str(source), f'file://{remote}/x/b.bin')
    download_file(str(remote / 'x' / 'a.bin'), str(tmp_path / 'got'), expected_size=11)
    assert (tmp_path / 'got').read_bytes() == b'local bytes'
    assert list_objects(str(remote / 'x')) == [str(remote / 'x' / 'a.bin'), str(remote / 'x' / 'b.bin')]
    assert list_objects(f'file://{remote}/x/b') == [f'file://{remote}/x/b.bin']
    with pytest.raises(RemoteNotFoundError):
        download_file(str(remote / 'absent'), str(tmp_path / 'none'), retries=3, **FAST)


def test_backend_objects_pickle(scripted: dict[str, Any]) -> None:
    backend = _backend(scripted)
    clone = pickle.loads(pickle.dumps(backend))
    assert clone.root == backend.root


def test_no_cloud_sdk_is_imported_until_a_request(tmp_path: Any) -> None:
    import subprocess
    import sys
    code = '''
import sys
import streaming_core
from streaming_core.machinery.lookup import get_registry
from streaming_core.storage.facade import get_backend
names = get_registry('storage').names()
assert {'s3', 'gs', 'oci', 'azure', 'azure-dl', 'http', 'https', 'file'} <= set(names), names
for url in ('s3://b/k', 'gs://b/k', 'oci://b@n/k', 'azure://c/k', 'azure-dl://f/k', 'https://h/k'):
    get_backend(url, {'anonymous': True} if url.startswith('gs') else None)
loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore', 'oci', 'azure', 's3transfer')
                or m.startswith('google.cloud') or m.startswith('google.auth'))
assert not loaded, loaded
print('lazy')
'''
    env = {k: v for k, v in os.environ.items() if not k.startswith(('AWS_', 'AZURE_', 'GCS_', 'OCI_'))}
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, env=env,
                            cwd=str(tmp_path))
    assert result.returncode == 0 and 'lazy' in result.stdout, result.stderr[-3000:]


def test_a_mistyped_url_is_refused_not_read_as_a_local_directory(tmp_path: Any, monkeypatch: Any) -> None:
    """``out='s3:/bucket/x'`` (a slash missing) wrote a local directory named ``s3:`` and said nothing, and
    ``remote='s3://'`` (nothing after the scheme) was read as the local path ``s3:``. Each entry point refuses
    them, naming the URL meant (``file:/x`` too, which was written to a relative directory ``file:``); the
    one-slash form that is real (``dbfs:/``) and ``file://`` still work."""
    from streaming_core import StreamingDataset
    from streaming_core.writing.merge import merge_index
    from tests.fixtures.data import write_mds
    mds = pytest.importorskip('streaming_mds')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"`out` 's3:/my-bucket/ds' is a URL with a slash missing.*s3://my-bucket/ds"):
        mds.MDSWriter(out='s3:/my-bucket/ds', columns={'id': 'int'})
    with pytest.raises(ValueError, match='slash missing'):
        mds.MDSWriter(out=(str(tmp_path / 'l'), 'gs:/b/ds'), columns={'id': 'int'})
    with pytest.raises(ValueError, match="`remote` 's3:/bkt/ds' is a URL with a slash missing"):
        StreamingDataset(remote='s3:/bkt/ds', local=str(tmp_path / 'c'), batch_size=1)
    for remote in ('s3://', 'oci://', 's3:///'):
        with pytest.raises(ValueError, match='names no bucket, host or path'):
            StreamingDataset(remote=remote, local=str(tmp_path / 'c'), batch_size=1)
    with pytest.raises(ValueError, match='slash missing'):
        merge_index('s3:/bkt/ds')
    with pytest.raises(ValueError, match=r"file:/abs/ds' is a URL with a slash missing.*file:///abs/ds"):
        mds.MDSWriter(out='file:/abs/ds', columns={'id': 'int'})
    with pytest.raises(ValueError, match=r"'gs:bkt/ds' is a gs URL without its \"//\".*write gs://bkt/ds"):
        StreamingDataset(remote='gs:bkt/ds', local=str(tmp_path / 'c'), batch_size=1)
    for fine in ('run:1/ds', 'C:/data', 'my.dir:x'):  # not a storage scheme: a local path as written
        check_location(fine, 'local')
    assert not os.path.exists(tmp_path / 's3:') and not os.path.exists(tmp_path / 'gs:')
    data = write_mds(str(tmp_path / 'data'), 10)
    assert len(StreamingDataset(remote=f'file://{data}', local=str(tmp_path / 'copy'), batch_size=1)) == 10
    check_location('dbfs:/Volumes/cat/schema/vol/ds', 'remote')  # the reference's form


def test_a_local_that_is_a_file_is_refused_naming_it(tmp_path: Any) -> None:
    """``local`` naming a file gave a bare FileExistsError from deep inside; it is refused naming the argument."""
    from streaming_core import StreamingDataset
    from tests.fixtures.data import write_mds
    pytest.importorskip('streaming_mds')
    remote = write_mds(str(tmp_path / 'remote'), 5)
    (tmp_path / 'afile').write_text('x')
    for local in (str(tmp_path / 'afile'), f'file://{tmp_path / "afile"}'):
        with pytest.raises(ValueError, match=r"`local` .*afile' is a file, not a directory"):
            StreamingDataset(remote=remote, local=local, batch_size=1)


def test_a_missing_relative_remote_names_where_it_was_looked_for(tmp_path: Any, monkeypatch: Any) -> None:
    """A relative path depends on the directory the job started from: run from another directory, ``remote='data/x'``
    is not found, and the error says where it was looked for; no empty cache directory is left behind (``streaming
    cache`` listed it as a dataset with no index)."""
    from streaming_core import StreamingDataset
    from streaming_core.common.paths import cache_root
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(RemoteNotFoundError) as info:
        StreamingDataset(remote='data/x', batch_size=1)
    message = str(info.value)
    assert f'looked for at {elsewhere}/data/x/index.json, from the working directory {elsewhere}' in message
    datasets = os.path.join(cache_root(), 'datasets')
    assert not os.path.isdir(datasets) or os.listdir(datasets) == []
    with pytest.raises(RemoteNotFoundError):
        StreamingDataset(remote='data/x', split='train', batch_size=1)  # nor the dataset's directory of a split
    assert not os.path.isdir(datasets) or os.listdir(datasets) == []
