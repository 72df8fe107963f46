"""A lock released by the garbage collector (a writer dropped without ``finish()``, a shard manager's pins) may be
released while the same thread is inside the code that takes such locks: a collection can run at any allocation.
With non-reentrant guards that thread waited for itself for ever (the full test suite hung once in
``test_writer_upload.py``: a writer's construction, inside the output-lock guard, collected a dropped writer whose
``__del__`` released its output lock). Each case runs in a fresh process, so a hang fails it instead of the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, tmp_path) -> str:
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code), str(tmp_path)], capture_output=True,
                            text=True, timeout=120, env={**os.environ, 'PYTHONPATH': ROOT,
                                                         'STREAMING_CORE_CACHE_DIR': str(tmp_path / 'cache')})
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def test_a_writer_collected_while_another_writer_takes_its_output_lock(tmp_path):
    out = _run('''
        import gc, os, sys, threading
        from streaming_core.writing import output_lock
        from streaming_mds import MDSWriter
        root = sys.argv[1]
        dropped = MDSWriter(out=os.path.join(root, 'a'), columns={'id': 'int'})
        dropped.write({'id': 1})
        cycle = [dropped]
        cycle.append(cycle)  # only the collector frees it
        del dropped, cycle
        real = os.makedirs
        def collecting(*args, **kwargs):  # a collection inside the guard, as any allocation there may start one
            gc.collect()
            return real(*args, **kwargs)
        output_lock.os.makedirs = collecting
        done = []
        thread = threading.Thread(target=lambda: done.append(MDSWriter(out=os.path.join(root, 'b'),
                                                                       columns={'id': 'int'})), daemon=True)
        thread.start()
        thread.join(30)
        output_lock.os.makedirs = real
        print('constructed' if done else 'deadlocked')
        if done:
            done[0].finish()
    ''', tmp_path)
    assert out.splitlines()[-1] == 'constructed'


def test_a_pin_released_by_the_collector_while_its_lock_table_is_in_use(tmp_path):
    out = _run('''
        import gc, os, sys, threading, weakref
        from streaming_core.storage import locking
        from streaming_core.storage.locking import RangeLocks
        locks = RangeLocks.for_path(os.path.join(sys.argv[1], 'table.lock'))
        locks.acquire(5, False, 1.0)
        class Manager:
            pass
        manager = Manager()
        manager.self = manager  # only the collector frees it
        weakref.finalize(manager, locks.release, 5)  # as a collected shard manager releases its pins
        del manager
        real = locking.fcntl.lockf
        def collecting(*args, **kwargs):
            gc.collect()
            return real(*args, **kwargs)
        locking.fcntl.lockf = collecting
        done = []
        thread = threading.Thread(target=lambda: done.append(locks.try_acquire(6, True)), daemon=True)
        thread.start()
        thread.join(30)
        locking.fcntl.lockf = real
        print('taken' if done == [True] and not locks.held(5) else f'deadlocked {done}')
    ''', tmp_path)
    assert out.splitlines()[-1] == 'taken'
