"""Byte-range locks (``streaming_core.storage.locking.RangeLocks``) across real processes and threads.

The other holder is always a real process (a fresh interpreter started with ``subprocess``, or a forked child), so
the kernel's record locks are what is tested: a holder killed with SIGKILL frees its locks, shared locks coexist,
an exclusive lock excludes, waits end in a clear error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from streaming_core.errors import WaitTimeoutError
from streaming_core.storage.locking import RangeLocks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A process that takes one lock, says so, then releases it when told ('release' on stdin) or waits to be killed.
HOLDER = textwrap.dedent('''
    import sys
    from streaming_core.storage.locking import RangeLocks
    path, byte, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    locks = RangeLocks.for_path(path)
    locks.acquire(byte, exclusive=(mode == 'ex'), timeout=30, what='the test lock')
    print('held', flush=True)
    for line in sys.stdin:
        if line.strip() == 'release':
            locks.release(byte)
            print('released', flush=True)
''')

# A process that tries one lock once and prints whether it got it.
TRIER = textwrap.dedent('''
    import sys
    from streaming_core.storage.locking import RangeLocks
    path, byte, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    print(RangeLocks.for_path(path).try_acquire(byte, exclusive=(mode == 'ex')))
''')


def _env() -> dict[str, str]:
    return {**os.environ, 'PYTHONPATH': ROOT}


class Holder:
    """A child process holding one lock until :meth:`release` or :meth:`kill`."""

    def __init__(self, path: str, byte: int, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, '-c', HOLDER, path, str(byte), mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        line = self.proc.stdout.readline().strip()
        assert line == 'held', self.proc.stderr.read() if self.proc.poll() is not None else line

    def release(self) -> None:
        self.proc.stdin.write('release\n')
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == 'released'

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture
def holders():
    started: list[Holder] = []

    def start(path: str, byte: int, mode: str = 'ex') -> Holder:
        holder = Holder(path, byte, mode)
        started.append(holder)
        return holder

    yield start
    for holder in started:
        holder.close()


def _other_process_gets(path: str, byte: int, mode: str) -> bool:
    result = subprocess.run([sys.executable, '-c', TRIER, path, str(byte), mode], capture_output=True, text=True,
                            env=_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip() == 'True'


@pytest.fixture
def lock_path(tmp_path):
    return str(tmp_path / 'coord' / 'locks')


def test_a_lock_held_by_a_process_killed_with_sigkill_is_free_again(lock_path, holders):
    holder = holders(lock_path, 7, 'ex')
    locks = RangeLocks.for_path(lock_path)
    assert not locks.try_acquire(7, exclusive=False)
    assert not locks.try_acquire(7, exclusive=True)
    holder.kill()
    assert holder.proc.returncode == -signal.SIGKILL
    assert locks.try_acquire(7, exclusive=True)
    assert locks.held(7)
    assert not _other_process_gets(lock_path, 7, 'sh')
    locks.release(7)
    assert not locks.held(7)
    assert _other_process_gets(lock_path, 7, 'ex')


def test_shared_locks_coexist_across_processes_and_exclude_an_exclusive_one(lock_path, holders):
    holder = holders(lock_path, 3, 'sh')
    locks = RangeLocks.for_path(lock_path)
    assert locks.try_acquire(3, exclusive=False)
    assert _other_process_gets(lock_path, 3, 'sh')
    assert not _other_process_gets(lock_path, 3, 'ex')
    assert not locks.try_acquire(3, exclusive=True)  # this process holds it shared: no upgrade in place
    locks.release(3)
    assert not _other_process_gets(lock_path, 3, 'ex')  # the holder still has its shared lock
    holder.release()
    assert _other_process_gets(lock_path, 3, 'ex')


def test_an_exclusive_lock_excludes_other_processes_and_bytes_are_independent(lock_path):
    locks = RangeLocks.for_path(lock_path)
    assert locks.try_acquire(0, exclusive=True)
    assert locks.try_acquire(2, exclusive=False)
    assert not _other_process_gets(lock_path, 0, 'sh')
    assert not _other_process_gets(lock_path, 0, 'ex')
    assert _other_process_gets(lock_path, 1, 'ex')  # the neighbouring byte is another lock
    assert _other_process_gets(lock_path, 2, 'sh') and not _other_process_gets(lock_path, 2, 'ex')
    locks.release(0)
    locks.release(2)
    assert _other_process_gets(lock_path, 0, 'ex') and _other_process_gets(lock_path, 2, 'ex')


def test_acquire_times_out_with_an_error_naming_what_was_waited_for(lock_path, holders):
    holders(lock_path, 5, 'ex')
    locks = RangeLocks.for_path(lock_path)
    start = time.monotonic()
    with pytest.raises(WaitTimeoutError) as info:
        locks.acquire(5, exclusive=False, timeout=0.4, what='shard 12 of stream train')
    elapsed = time.monotonic() - start
    assert 0.4 <= elapsed < 10
    message = str(info.value)
    assert 'shard 12 of stream train' in message and os.path.abspath(lock_path) in message and 'byte 5' in message
    assert 'another process holds it' in message
    assert isinstance(info.value, TimeoutError)
    assert not locks.held(5)


def test_acquire_waits_until_the_other_process_releases_and_calls_on_wait(lock_path, holders):
    holder = holders(lock_path, 9, 'ex')
    locks = RangeLocks.for_path(lock_path)
    waits: list[float] = []
    timer = threading.Timer(0.5, holder.release)
    timer.start()
    try:
        start = time.monotonic()
        locks.acquire(9, exclusive=True, timeout=30, what='the test lock', on_wait=lambda: waits.append(1))
        elapsed = time.monotonic() - start
    finally:
        timer.join()
    assert elapsed >= 0.3
    assert locks.held(9)
    assert waits, 'on_wait was never called during a wait of half a second'
    assert not _other_process_gets(lock_path, 9, 'sh')
    locks.release(9)


def test_threads_of_one_process_see_each_others_locks(lock_path):
    locks = RangeLocks.for_path(lock_path)
    got: dict[str, bool] = {}
    assert locks.try_acquire(4, exclusive=True)

    def other_thread():
        got['exclusive'] = locks.try_acquire(4, exclusive=True)
        got['shared'] = locks.try_acquire(4, exclusive=False)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join(30)
    assert got == {'exclusive': False, 'shared': False}
    locks.release(4)
    assert locks.try_acquire(4, exclusive=False)  # shared holds are counted
    assert locks.try_acquire(4, exclusive=False)
    locks.release(4)
    assert locks.held(4) and not _other_process_gets(lock_path, 4, 'ex')
    locks.release(4)
    assert not locks.held(4) and _other_process_gets(lock_path, 4, 'ex')
    locks.release(4)  # releasing a lock not held is harmless


def test_for_path_is_one_instance_per_file(lock_path, tmp_path):
    first = RangeLocks.for_path(lock_path)
    relative = os.path.relpath(lock_path)
    assert RangeLocks.for_path(relative) is first
    assert os.path.isfile(lock_path)  # parent directories and the file are created
    assert RangeLocks.for_path(str(tmp_path / 'other')) is not first


def test_a_forked_child_starts_with_no_locks(lock_path):
    locks = RangeLocks.for_path(lock_path)
    assert locks.try_acquire(6, exclusive=True)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running any cleanup of the parent's
        try:
            child = RangeLocks.for_path(lock_path)
            report = f'{child is locks} {child.held(6)} {child.try_acquire(6, exclusive=False)} ' \
                     f'{child.try_acquire(8, exclusive=True)}'
            os.write(write_end, report.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # A new instance; it does not hold the parent's lock and cannot take it (the parent still does); other bytes work.
    assert report == 'False False False True'
    assert locks.held(6)
    assert _other_process_gets(lock_path, 8, 'ex')  # the child's lock died with it
    locks.release(6)


def test_a_child_forked_while_a_module_lock_is_held_gets_it_free():
    """A DataLoader forking its workers while another thread of the parent holds a module-level lock (the plan
    cache's waits up to 10 s in it): the child's copy used to stay locked forever."""
    import os
    import threading

    from streaming_core.ordering import plan_cache, rank_versions
    from streaming_core.storage import facade, redact
    locks = [plan_cache._held_mutex, rank_versions._ordinals_lock, facade._backends_lock, redact._lock]
    held, done = threading.Event(), threading.Event()

    def hold():
        for lock in locks:
            lock.acquire()
        held.set()
        done.wait(30)
        for lock in locks:
            lock.release()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        pid = os.fork()
        if pid == 0:  # the child: each module's lock must be free
            fresh = [plan_cache._held_mutex, rank_versions._ordinals_lock, facade._backends_lock, redact._lock]
            ok = all(lock.acquire(timeout=2) for lock in fresh)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, 'a module lock was still held in the forked child'
    finally:
        done.set()
        thread.join(10)


def test_a_child_forked_inside_a_fork_safe_lock_releases_it_normally():
    """The forking thread itself inside the critical section: the child, where it goes on, holds the lock and
    releases it as usual (no 'release unlocked lock')."""
    import os

    from streaming_core.common.fork_safe import ForkSafeLock
    lock = ForkSafeLock()
    with lock:
        pid = os.fork()
        if pid == 0:
            try:
                held = lock.locked()
                lock.release()
                ok = held and lock.acquire(timeout=2)
            except BaseException:  # noqa: BLE001 (the child reports by exit code)
                ok = False
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
