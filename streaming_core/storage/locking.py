"""Kernel-released byte-range locks for node-local coordination between processes.

Each lock file holds many independent locks, one per byte (a shard's "in use" byte, its "preparing" byte...).
POSIX record locks (``fcntl.lockf``) are released by the kernel when a process dies, so a crash never leaves a
stale lock. They are per process, so this module also keeps an in-process table: threads of one process see
each other's locks as conflicts, shared locks are reference-counted, and a forked child starts with no locks.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from typing import Callable, ClassVar

from streaming_core.errors import WaitTimeoutError

__all__ = ['RangeLocks']


class RangeLocks:
    """The byte-range locks of one file, shared by every thread of this process.

    Use :meth:`for_path` to get the process-wide instance for a path.
    """

    _instances: ClassVar[dict[str, 'RangeLocks']] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        self._held: dict[int, list] = {}  # byte -> [exclusive, count, thread that took it]
        # Reentrant: a collected shard manager's finalizer releases its pins, maybe while this thread is in here.
        self._mutex = threading.RLock()

    @classmethod
    def for_path(cls, path: str) -> 'RangeLocks':
        """The process-wide instance for ``path`` (created on first use)."""
        path = os.path.abspath(path)
        locks = cls._instances.get(path)
        if locks is None:
            with cls._instances_lock:
                locks = cls._instances.get(path)
                if locks is None:
                    locks = cls(path)
                    cls._instances[path] = locks
        return locks

    @classmethod
    def _after_fork(cls) -> None:
        for locks in cls._instances.values():
            try:
                os.close(locks._fd)
            except OSError:
                pass
        cls._instances = {}
        cls._instances_lock = threading.Lock()

    def try_acquire(self, byte: int, exclusive: bool) -> bool:
        """Take the lock on ``byte`` without waiting; False when another thread or process holds it."""
        with self._mutex:
            held = self._held.get(byte)
            if held is not None:
                if not exclusive and not held[0]:
                    held[1] += 1
                    return True
                return False
            mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
            try:
                fcntl.lockf(self._fd, mode | fcntl.LOCK_NB, 1, byte, os.SEEK_SET)
            except OSError as err:
                if err.errno in (errno.EACCES, errno.EAGAIN):
                    return False
                raise
            self._held[byte] = [exclusive, 1, threading.get_ident()]
            return True

    def acquire(self, byte: int, exclusive: bool, timeout: float, what: str = '',
                on_wait: Callable[[], None] | None = None, max_delay: float = 0.05) -> None:
        """Take the lock on ``byte``, waiting (with sleeps growing from 1 ms to ``max_delay``) up to ``timeout``
        seconds; ``on_wait`` is called while waiting (a reader uses it to release what it holds, so the holder can
        make progress). A waiter notices a release at most ``max_delay`` late.

        Raises:
            WaitTimeoutError: naming ``what`` when the lock could not be taken in time.
        """
        deadline = time.monotonic() + timeout
        delay = slept = 0.001
        while not self.try_acquire(byte, exclusive):
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(f'Timed out after {timeout:.0f} s waiting for {what or "a lock"} '
                                       f'({self.path}, byte {byte}); another process holds it.')
            if on_wait is not None and slept >= 0.06:  # a wait that is not a moment's
                on_wait()
            time.sleep(delay)
            slept += delay
            delay = min(delay * 2, max_delay)

    def release(self, byte: int) -> None:
        """Release one hold of the lock on ``byte``."""
        with self._mutex:
            held = self._held.get(byte)
            if held is None:
                return
            held[1] -= 1
            if held[1] > 0:
                return
            del self._held[byte]
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, byte, os.SEEK_SET)

    def held(self, byte: int) -> bool:
        """Whether this process holds the lock on ``byte``."""
        return byte in self._held

    def held_exclusive_here(self, byte: int) -> bool:
        """Whether the calling thread holds the lock on ``byte`` exclusively (taking it again would wait for
        itself)."""
        held = self._held.get(byte)
        return held is not None and held[0] and held[2] == threading.get_ident()


os.register_at_fork(after_in_child=RangeLocks._after_fork)
