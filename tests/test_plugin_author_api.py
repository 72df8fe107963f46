"""The plugin-author API (issue 14 item 2): converted first-party plugins import only the public facade
(``streaming_core``) and the author module (``streaming_core.plugin_api``); the helpers it offers behave.

The import check parses every module of the converted plugins with :mod:`ast` (never imports them) and counts every
import, at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import threading

import pytest

import streaming_core.plugin_api as api
from streaming_core.errors import PermanentStorageError
from streaming_core.storage.clients import ClientCache
from streaming_core.storage.url import StorageURL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWED = {'streaming_core', 'streaming_core.plugin_api'}
#: The first-party plugins that import only the public API: all of them but streaming-compat.
# streaming-compat is exempt: it is the reference's API surface (its module paths) laid over our internals.
CONVERTED = ('streaming-s3', 'streaming-gcs', 'streaming-oci', 'streaming-azure', 'streaming-py1e',
             'streaming-stratified', 'streaming-compression', 'streaming-databricks', 'streaming-sftp',
             'streaming-datasets', 'streaming-mds', 'streaming-jsonl', 'streaming-csv', 'streaming-parquet',
             'streaming-hf', 'streaming-webdataset', 'streaming-litdata')


def _core_imports(path: str) -> list[tuple[str, int]]:
    tree = ast.parse(open(path, encoding='utf-8').read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.append((node.module, node.lineno))
    return [(name, line) for name, line in found if name.split('.')[0] == 'streaming_core']


def _package_files(dist: str) -> list[str]:
    top = os.path.join(ROOT, 'plugins', dist)
    files = []
    for entry in sorted(os.listdir(top)):
        package = os.path.join(top, entry)
        if entry == 'tests' or not os.path.isfile(os.path.join(package, '__init__.py')):
            continue
        for directory, subdirs, names in os.walk(package):
            subdirs[:] = [d for d in subdirs if d != '__pycache__']
            files += [os.path.join(directory, n) for n in sorted(names) if n.endswith('.py')]
    return files


@pytest.mark.parametrize('dist', CONVERTED)
def test_converted_plugins_import_only_the_public_api(dist):
    files = _package_files(dist)
    assert files, f'no package found for {dist}'
    bad = [f'{os.path.relpath(path, ROOT)}:{line} imports {name}' for path in files
           for name, line in _core_imports(path) if name not in ALLOWED]
    assert not bad, 'import these from streaming_core.plugin_api instead:\n' + '\n'.join(bad)


def test_every_first_party_plugin_but_compat_is_checked():
    dists = {d for d in os.listdir(os.path.join(ROOT, 'plugins')) if d.startswith('streaming-')}
    assert dists - set(CONVERTED) == {'streaming-compat'}, 'add the new plugin to CONVERTED'


def test_the_checker_sees_imports_inside_functions_and_type_checking(tmp_path):
    module = tmp_path / 'mod.py'
    module.write_text('from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n'
                      '    from streaming_core.ordering.world import World\n'
                      'def f():\n    import streaming_core.storage.facade\n'
                      '    from streaming_core.plugin_api import hookimpl\n')
    assert _core_imports(str(module)) == [('streaming_core.ordering.world', 3), ('streaming_core.storage.facade', 5),
                                          ('streaming_core.plugin_api', 6)]


def test_every_author_name_resolves_and_loading_a_plugin_stays_cheap():
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    with pytest.raises(AttributeError, match='plugin-author API is'):
        api.nothing_here  # noqa: B018
    heavy = ('numpy', 'streaming_core.writing.writer', 'streaming_core.storage.facade')
    code = ('import sys\nfrom streaming_core.plugin_api import RegistryView, hookimpl\n'
            f'print(sorted(m for m in {heavy!r} if m in sys.modules))')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, 'PYTHONPATH': ROOT})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '[]'


def test_storage_url_parses_once_and_redacts():
    url = StorageURL.parse('s3://user:secret@bucket/dir/shard.mds?X-Amz-Signature=abc', scheme='s3', need_key=True)
    assert (url.scheme, url.netloc, url.key) == ('s3', 'user:secret@bucket', 'dir/shard.mds')
    assert 'secret' not in url.redacted and 'abc' not in url.redacted and 'secret' not in repr(url)
    assert str(url) == url.redacted
    assert url.child('dir/other.mds').url.endswith('/dir/other.mds')
    oci = StorageURL.parse('oci://b@ns/a/b.bin', scheme='oci', need_key=True, namespace=True)
    assert (oci.bucket, oci.namespace, oci.key) == ('b', 'ns', 'a/b.bin')
    assert StorageURL.parse('s3://b/k', scheme='s3').bucket == 'b'
    with pytest.raises(PermanentStorageError, match=r'Expected a s3:// URL, got gs://b/k\.'):
        StorageURL.parse('gs://b/k', scheme='s3')
    with pytest.raises(PermanentStorageError, match=r'it names no bucket\. Use s3://BUCKET/KEY\.'):
        StorageURL.parse('s3:///k', scheme='s3')
    with pytest.raises(PermanentStorageError, match=r'Invalid OCI URL oci://b/dir/: it names no object'):
        StorageURL.parse('oci://b/dir/', scheme='oci', need_key=True, label='OCI')


def test_client_cache_creates_once_per_key_and_process():
    cache: ClientCache[object] = ClientCache()
    made = []

    def make():
        made.append(1)
        return object()

    barrier = threading.Barrier(8)
    results = []

    def worker():
        barrier.wait()
        results.append(cache.get(('acct', 30.0), make))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len({id(r) for r in results}) == 1
    assert cache.get(('acct', 60.0), make) is not results[0] and len(cache) == 2
    copy = pickle.loads(pickle.dumps(cache))
    assert len(copy) == 0 and copy.get('k', lambda: 'fresh') == 'fresh'
    cache.clear()
    assert len(cache) == 0


@pytest.mark.skipif(not hasattr(os, 'fork'), reason='needs fork')
def test_client_cache_starts_empty_in_a_forked_child():
    cache: ClientCache[str] = ClientCache()
    cache.get('k', lambda: 'parent')
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's client must not be reused
        os.close(read)
        value = cache.get('k', lambda: 'child')
        os.write(write, value.encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 100) == b'child' and status == 0
    assert cache.get('k', lambda: 'again') == 'parent'
