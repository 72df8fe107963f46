"""A per-process cache of SDK clients, keyed by the options a client is built from.

Storage backends create one client per process and option set (a timeout, an account, signed or unsigned), under a
lock, once. :class:`ClientCache` is that double-checked lock, written once::

    class MyBackend:
        def __init__(self, **options):
            self._clients = ClientCache()

        def _client(self, timeout: float):
            return self._clients.get(float(timeout), lambda: make_sdk_client(timeout))

It is fork-safe (a forked child, which must not share the parent's connections, starts with an empty cache and a new
lock) and pickles empty (a backend pickled into a DataLoader worker or another machine creates its own clients).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Generic, Hashable, TypeVar

__all__ = ['ClientCache']

V = TypeVar('V')


class ClientCache(Generic[V]):
    """A thread-safe, fork-safe, pickle-empty ``{key: client}`` cache (see the module docstring)."""

    def __init__(self) -> None:
        self._start()

    def _start(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._clients: dict[Hashable, V] = {}

    def get(self, key: Hashable, create: Callable[[], V]) -> V:
        """The client for ``key``, created with ``create()`` once per process (concurrent callers wait for it)."""
        if self._pid != os.getpid():
            self._start()
        client = self._clients.get(key)
        if client is None:
            with self._lock:
                client = self._clients.get(key)
                if client is None:
                    client = create()
                    self._clients[key] = client
        return client

    def clear(self) -> None:
        """Drop every client (a backend's ``reset`` between retries): the next :meth:`get` creates a fresh one."""
        with self._lock:
            self._clients = {}

    def __len__(self) -> int:
        return 0 if self._pid != os.getpid() else len(self._clients)

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._start()
