"""Forked workers start without a full garbage collection of the parent's objects.

A DataLoader worker forked from a process that imported torch and built a dataset inherits hundreds of thousands of
Python objects that the cyclic garbage collector still tracks. The worker's first allocations often trigger a
collection of the oldest generation: it walks every inherited object, writing to each one's header, so every page
holding Python objects is copied (copy-on-write) before the worker yields its first sample. Measured on a 2-core
machine: 100-500 ms per worker before its first batch, against 10-30 ms without it.

:func:`install` registers fork handlers (once per process) that move every tracked object to the collector's permanent
generation just before ``os.fork()`` (:func:`gc.freeze`, the use the Python documentation recommends for pre-forking
servers) and back again in the parent right after (:func:`gc.unfreeze`), so the parent collects as before. In the
child, the parent's objects stay frozen: the child's collections walk only the objects it creates (cyclic garbage
among the inherited objects is not collected there). A freeze the program made itself is left alone: the handlers do
nothing while :func:`gc.get_freeze_count` is non-zero. ``STREAMING_CORE_GC_FREEZE_AT_FORK=0`` disables them.

The same handler also waits, before the fork, for imports other threads are running to finish (at most
:data:`IMPORT_WAIT_SECONDS`): a module lock held by another thread at ``os.fork()`` stays held in the child, where no
thread will release it, and the child's first import of that module (a lazily imported part of the library, or a
plugin loaded on first use) then blocks for ever. Two threads of one process, one iterating a DataLoader with forked
workers while the other imports, hung that way.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time

__all__ = ['ENV', 'IMPORT_WAIT_SECONDS', 'install', 'installed', 'imports_in_other_threads']

#: Set to 0 to keep the collector's default behaviour at fork.
ENV = 'STREAMING_CORE_GC_FREEZE_AT_FORK'
#: The longest a fork waits for other threads' imports (then it goes ahead, with a warning).
IMPORT_WAIT_SECONDS = 15.0
_state = {'installed': False, 'froze': False}
logger = logging.getLogger('streaming_core.machinery.forking')


def imports_in_other_threads() -> list[str]:
    """The modules other threads of this process are importing now (holding their module locks); empty where the
    interpreter's import machinery does not expose them."""
    try:
        from importlib import _bootstrap
        refs = list(_bootstrap._module_locks.values())  # type: ignore[attr-defined]
    except (ImportError, AttributeError, RuntimeError):
        return []
    me, busy = threading.get_ident(), []
    for ref in refs:
        lock = ref() if callable(ref) else ref
        owner, count = getattr(lock, 'owner', None), getattr(lock, 'count', 0)
        if owner is not None and owner != me and (count if isinstance(count, int) else len(count)):
            busy.append(str(getattr(lock, 'name', '?')))
    return busy


def _wait_for_imports() -> None:
    if threading.active_count() < 2:
        return
    deadline = time.monotonic() + IMPORT_WAIT_SECONDS
    busy = imports_in_other_threads()
    while busy and time.monotonic() < deadline:
        time.sleep(0.001)
        busy = imports_in_other_threads()
    if busy:
        logger.warning('Forking while other threads still import %s (after %.0f s): a forked process that imports '
                       'one of them will hang.', ', '.join(sorted(busy)), IMPORT_WAIT_SECONDS)


def _before() -> None:
    _wait_for_imports()
    if gc.get_freeze_count() == 0 and os.environ.get(ENV, '1').strip().lower() not in ('0', 'false', 'no', 'off'):
        gc.freeze()
        _state['froze'] = True


def _after_in_parent() -> None:
    if _state['froze']:
        _state['froze'] = False
        gc.unfreeze()


def _after_in_child() -> None:
    _state['froze'] = False  # the inherited objects stay in the permanent generation


def install() -> None:
    """Register the fork handlers (idempotent).

    Before-fork handlers run in the reverse order of their registration: ``concurrent.futures`` takes its executors'
    lock in one, so it is imported first and ours runs before it (a thread whose import submits work to an executor
    would otherwise wait for that lock, held by the forking thread, for all of :data:`IMPORT_WAIT_SECONDS`)."""
    if not _state['installed']:
        _state['installed'] = True
        import concurrent.futures.thread  # noqa: F401 (see above)
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)


def installed() -> bool:
    """Whether :func:`install` ran in this process."""
    return _state['installed']
