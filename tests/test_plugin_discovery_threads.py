"""Plugin discovery under threads: a lookup made while another thread discovers waits for the whole discovery.

Regression for issue 14: the re-entrancy guard of ``plugins.ensure_loaded`` was one process-wide flag read outside
the lock, so a second thread that looked a name up while the first was discovering returned early and saw half-filled
registries (``UnknownNameError: Unknown shard format 'mds'`` from two threads constructing datasets right after
import). Each run below is a fresh process, as a user's script is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import types

import pytest

from streaming_core.hookspecs import hookimpl
from streaming_core.machinery import discovery as plugins
from streaming_core.machinery.lookup import get_registry
from streaming_core.testing import registered_plugin
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Threads start together right after ``import streaming_core`` (the dataset and stream modules are imported first so
# the threads race on discovery, not on the import lock); half construct datasets, half look names up directly.
SCRIPT = textwrap.dedent('''
    import json, sys, threading
    import streaming_core
    from streaming_core.machinery import discovery as plugins
    import streaming_core.reading.dataset, streaming_core.machinery.lookup
    assert plugins._state['pm'] is None, 'discovery ran before the threads'
    data_dir, threads = sys.argv[1], int(sys.argv[2])
    barrier = threading.Barrier(threads)
    errors, sizes = [], []

    def construct(i):
        barrier.wait()
        try:
            dataset = streaming_core.StreamingDataset(local=data_dir, batch_size=1, shuffle=True,
                                                      shuffle_algo='py1e')
            sizes.append(dataset.size)
        except Exception as err:
            errors.append(f'{type(err).__name__}: {err}'.splitlines()[0])

    def lookup(i):
        barrier.wait()
        try:
            from streaming_core.machinery.lookup import get_registry
            get_registry('format').get('mds')
            get_registry('codec').get('int')
            get_registry('compressor').get('zstd')
            get_registry('storage').get('s3')
        except Exception as err:
            errors.append(f'{type(err).__name__}: {err}'.splitlines()[0])

    workers = [threading.Thread(target=construct if i % 2 else lookup, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(json.dumps({'errors': errors, 'sizes': sizes}))
''')


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
    return write_mds(str(tmp_path_factory.mktemp('threads') / 'ds'), 40)


@pytest.mark.parametrize('run', range(4))
def test_threads_constructing_datasets_right_after_import(data_dir, run):
    threads = 8
    env = {**os.environ, 'PYTHONPATH': ROOT}
    result = subprocess.run([sys.executable, '-c', SCRIPT, data_dir, str(threads)], capture_output=True, text=True,
                            env=env, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report['errors'] == [], report['errors']
    assert report['sizes'] == [40] * (threads // 2)


def _slow_plugin(started: threading.Event, release: threading.Event) -> types.ModuleType:
    module = types.ModuleType('slow_discovery_plugin')

    def register_hashes(registry):
        started.set()
        assert release.wait(30), 'the test never released the slow plugin'
        registry.add('slow-hash', lambda data: 'ff')

    module.register_hashes = hookimpl(register_hashes)
    return module


def test_lookup_from_another_thread_waits_for_a_plugin_being_registered():
    """In-process: while one thread's plugin is still registering, another thread's lookup of a builtin name works
    and a lookup of the slow plugin's name, made after its hook finished, finds it."""
    plugins.ensure_loaded()
    started, release = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def register():
        with registered_plugin(_slow_plugin(started, release), 'slow-plugin'):
            outcome['inside'] = get_registry('hash').get('slow-hash')(b'')
            release.set()

    worker = threading.Thread(target=register)
    worker.start()
    assert started.wait(30)
    outcome['builtin'] = get_registry('hash').get('sha256')(b'') is not None
    release.set()
    worker.join(30)
    assert outcome == {'inside': 'ff', 'builtin': True}
    assert 'slow-hash' not in get_registry('hash')


def test_discovery_reentered_from_a_hook_on_the_same_thread_does_not_deadlock(tmp_path):
    """An installed plugin whose hook looks a name up (same thread, during discovery) sees the builtins registered
    before it, and a second thread's lookup still waits for the whole discovery."""
    dist = tmp_path / 'reentrant_plugin-0.1.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: reentrant-plugin\nVersion: 0.1\n')
    (dist / 'entry_points.txt').write_text('[streaming_core]\nreentrant = reentrant_plugin_mod\n')
    (tmp_path / 'reentrant_plugin_mod.py').write_text(textwrap.dedent('''
        import threading
        from streaming_core.hookspecs import hookimpl
        from streaming_core.machinery.lookup import get_registry
        SEEN = {}

        @hookimpl
        def register_hashes(registry):
            SEEN['builtin'] = 'sha256' in get_registry('hash')
            other = threading.Thread(target=lambda: SEEN.update(other='mds' in get_registry('format')))
            other.start()
            other.join(0.5)
            SEEN['other_waited'] = other.is_alive()
            SEEN['other_thread'] = other
            registry.add('reentrant-hash', lambda data: '00')
    '''))
    code = textwrap.dedent('''
        import reentrant_plugin_mod as mod
        from streaming_core.machinery.lookup import get_registry
        assert get_registry('hash').get('reentrant-hash')(b'') == '00'
        mod.SEEN.pop('other_thread').join(30)
        print(sorted(mod.SEEN.items()))
    ''')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env={**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), ROOT])})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[('builtin', True), ('other', True), ('other_waited', True)]"


def test_a_child_forked_while_another_thread_discovers_runs_its_own_discovery(tmp_path):
    """Forking while another thread is inside discovery (holding its lock) must not leave the child deadlocked or
    with half-filled registries: the child starts discovery afresh on its first lookup."""
    dist = tmp_path / 'slow_plugin-0.1.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: slow-plugin\nVersion: 0.1\n')
    (dist / 'entry_points.txt').write_text('[streaming_core]\nslow = slow_plugin_mod\n')
    (tmp_path / 'slow_plugin_mod.py').write_text(textwrap.dedent('''
        import threading
        from streaming_core.hookspecs import hookimpl
        STARTED, RELEASE = threading.Event(), threading.Event()

        @hookimpl
        def register_hashes(registry):
            STARTED.set()
            RELEASE.wait(5)
            registry.add('slow-hash', lambda data: '00')
    '''))
    code = textwrap.dedent('''
        import os, signal, threading
        import slow_plugin_mod as mod
        from streaming_core.machinery.lookup import get_registry
        discovering = threading.Thread(target=lambda: get_registry('hash').get('slow-hash'))
        discovering.start()
        assert mod.STARTED.wait(30)
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a deadlock ends the child instead of the test
            mod.RELEASE.set()  # the child's copy: its own discovery must not wait
            ok = get_registry('format').origin('mds') == 'mds' and get_registry('hash').get('slow-hash')(b'') == '00'
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        mod.RELEASE.set()
        discovering.join(30)
        print(os.waitstatus_to_exitcode(status), get_registry('hash').origin('slow-hash'))
    ''')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                            env={**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), ROOT])})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['0', 'slow']
