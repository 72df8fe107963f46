"""Locks that a forked child never inherits held.

``os.fork()`` copies a lock in the state it is in: when another thread of the parent held a module-level lock at
that moment (a DataLoader forking its workers while a prefetch thread works), the child's copy stays locked forever
and the child's first ``with lock:`` never returns. :class:`ForkSafeLock` gives every child a new, free lock; no
thread of the child can be inside the critical section, since only the forking thread exists there.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

__all__ = ['ForkSafeLock']


class ForkSafeLock:
    """A ``threading.Lock`` (``with``, ``acquire``, ``release``) that is free again in a forked child."""

    _instances: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        ForkSafeLock._instances.add(self)

    def __enter__(self) -> ForkSafeLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """As ``threading.Lock.acquire``."""
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        """As ``threading.Lock.release``."""
        self._lock.release()

    def locked(self) -> bool:
        """Whether a thread holds the lock."""
        return self._lock.locked()

    @classmethod
    def _after_fork_in_child(cls) -> None:
        for lock in list(cls._instances):
            lock._lock = threading.Lock()


os.register_at_fork(after_in_child=ForkSafeLock._after_fork_in_child)
