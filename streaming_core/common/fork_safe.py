"""Locks that a forked child never inherits held, per-process state that is never pickled nor inherited, and the
environment a dataset carries into the processes it is pickled into.

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

__all__ = ['ForkSafeLock', 'ProcessLocal', 'CarriedEnvironment', 'carry_environment', 'carried_environment']


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


class ProcessLocal:
    """Base for storage backends that hold per-process clients: never pickled, recreated after a fork.

    Subclasses name their per-process attributes in ``_process_local`` and create them in ``_init_runtime`` (calling
    ``super()._init_runtime()`` first); call :meth:`_check_process` before using a client.
    """

    _process_local: tuple[str, ...] = ()

    def _init_runtime(self) -> None:
        """Create the per-process state (a lock and the owner pid; subclasses add their clients)."""
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _check_process(self) -> None:
        """Start fresh in a forked child: the parent's clients and locks are not ours."""
        if self._pid != os.getpid():
            self._init_runtime()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in (*self._process_local, '_lock', '_pid'):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()


_CARRIED_PREFIXES: list[str] = []


def carry_environment(prefix: str) -> None:
    """Make every dataset pickled in this process carry the environment variables whose names start with ``prefix``
    into the process that unpickles it (a DataLoader worker, a spawned rank). A plugin that records what a process
    decided in its environment (``streaming-hf``'s commit pins) calls it: children started by ``spawn`` inherit the
    environment of the moment, but a ``forkserver`` child inherits its server's, which may be older."""
    if not prefix or not isinstance(prefix, str):
        raise ValueError(f'carry_environment: the prefix must be a non-empty string, got {prefix!r}.')
    if prefix not in _CARRIED_PREFIXES:
        _CARRIED_PREFIXES.append(prefix)


def carried_environment() -> dict[str, str]:
    """The variables to carry (see :func:`carry_environment`), as they are now."""
    if not _CARRIED_PREFIXES:
        return {}
    prefixes = tuple(_CARRIED_PREFIXES)
    return {name: value for name, value in os.environ.items() if name.startswith(prefixes)}


class CarriedEnvironment(dict):  # type: ignore[type-arg]
    """The carried variables (:func:`carried_environment`) as a value that sets them the moment it is unpickled in
    another process: put first in a pickled state, it sets them before the objects after it are rebuilt (a shard
    table that checks its index while it is unpickled). Unpickled in the process that pickled it (a copy, an older
    pickle loaded again), it changes nothing: that process's own values may be newer."""

    def __reduce__(self) -> tuple[Any, tuple[dict[str, str], int]]:
        return _arrive, (dict(self), os.getpid())


def _arrive(carried: dict[str, str], pid: int) -> CarriedEnvironment:
    """Unpickled: set the carried variables where this process, another than the pickler, has other values or none."""
    if pid != os.getpid():
        for name, value in carried.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
    return CarriedEnvironment(carried)
