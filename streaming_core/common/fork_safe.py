"""Locks that a forked child never inherits held.

``os.fork()`` copies a lock in the state it is in: when another thread of the parent held a module-level lock at
that moment (a DataLoader forking its workers while a prefetch thread works), the child's copy stays locked forever
and the child's first ``with lock:`` never returns. :class:`ForkSafeLock` gives every child a new lock: free, or
held when the forking thread itself held it (the only thread the child has, which then releases it as usual).
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
        self._owner: int | None = None
        ForkSafeLock._instances.add(self)

    def __enter__(self) -> ForkSafeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """As ``threading.Lock.acquire``."""
        got = self._lock.acquire(blocking, timeout)
        if got:
            self._owner = threading.get_ident()
        return got

    def release(self) -> None:
        """As ``threading.Lock.release``."""
        self._owner = None
        self._lock.release()

    def locked(self) -> bool:
        """Whether a thread holds the lock."""
        return self._lock.locked()

    @classmethod
    def _after_fork_in_child(cls) -> None:
        me = threading.get_ident()  # the forking thread keeps its identity in the child
        for lock in list(cls._instances):
            fresh = threading.Lock()
            if lock._owner == me:
                fresh.acquire()
            else:
                lock._owner = None
            lock._lock = fresh


os.register_at_fork(after_in_child=ForkSafeLock._after_fork_in_child)
