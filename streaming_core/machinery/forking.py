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
"""

from __future__ import annotations

import gc
import os

__all__ = ['ENV', 'install', 'installed']

#: Set to 0 to keep the collector's default behaviour at fork.
ENV = 'STREAMING_CORE_GC_FREEZE_AT_FORK'
_state = {'installed': False, 'froze': False}


def _before() -> None:
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
    """Register the fork handlers (idempotent)."""
    if not _state['installed']:
        _state['installed'] = True
        os.register_at_fork(before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child)


def installed() -> bool:
    """Whether :func:`install` ran in this process."""
    return _state['installed']
