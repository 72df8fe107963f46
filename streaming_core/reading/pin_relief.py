"""Random access under a cache limit gives up its pins when it goes idle and another reader needs the room.

``ds[i]`` keeps the views of shards it touched twice open, each pinned against eviction (another process must not
evict a file this one has mapped), and gives them up when its own next shard needs room. Nothing else of the process
may ever call it again: a notebook that looked at some samples, an evaluation pass that is over, a thread that
finished. Readers of the node short of room (another rank, a DataLoader worker, another dataset of the same
directory) would then wait for the cache's timeout and fail. So a daemon thread per shard manager, started with its
first pinned random-access view and ended when none is left or the manager is gone, closes those views once random
access has been idle for :data:`~streaming_core.reading.iteration.IDLE_AFTER` while a reader of the node is short of
room, as an idle iterator does with its own (:meth:`~streaming_core.reading.iteration.EpochIterator._relieve`).
Views are dropped, not unmapped: a thread may be reading through one; a view is opened again when next read.

A manager collected with views still open (its dataset deleted) releases their pins (:func:`release_at_collection`):
the process-wide lock table would otherwise keep them for the life of the process.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streaming_core.reading.shard_manager import ShardManager
    from streaming_core.storage.locking import RangeLocks

__all__ = ['note_random_access', 'release_at_collection', 'POLL_SECONDS']

#: How often the watcher looks (a reader short of room says so for 0.5 s at a time: see ``short_of_room``).
POLL_SECONDS = 0.2


def note_random_access(manager: ShardManager) -> None:
    """Random access just opened a pinned view of ``manager``: make sure a watcher runs."""
    with manager.views_lock:
        watcher = manager.relief_thread
        if watcher is not None and watcher.is_alive():
            return
        watcher = threading.Thread(target=_watch, args=(weakref.ref(manager), os.getpid()),
                                   name='streaming-pin-relief', daemon=True)
        manager.relief_thread = watcher
    watcher.start()


def _watch(ref: weakref.ref[ShardManager], pid: int) -> None:
    from streaming_core.reading.iteration import IDLE_AFTER
    reads, active_at = -1, time.monotonic()
    while True:
        time.sleep(POLL_SECONDS)
        manager = ref()
        if manager is None or os.getpid() != pid:
            return
        with manager.views_lock:
            if not manager.unheld_views():  # nothing left to give up: a later random access starts a new watcher
                manager.relief_thread = None
                return
        now = time.monotonic()
        if manager.random_reads != reads:  # read since the last look: active
            reads, active_at = manager.random_reads, now
        cache = manager.cache
        if cache is not None and now - active_at >= IDLE_AFTER and cache.short_of_room():
            manager.trim(keep=0)
        del manager


def release_at_collection(manager: ShardManager, pinned: dict[int, tuple[RangeLocks, int]]) -> Any:
    """Register the release of the pins left in ``pinned`` (shard -> its lock table and byte, kept current by the
    manager) when ``manager`` is collected, in the process that took them."""
    return weakref.finalize(manager, _release, pinned, os.getpid())


def _release(pinned: dict[int, tuple[RangeLocks, int]], pid: int) -> None:
    if os.getpid() != pid:
        return
    for locks, byte in list(pinned.values()):
        locks.release(byte)
    pinned.clear()
