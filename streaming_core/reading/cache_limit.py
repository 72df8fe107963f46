"""Node-wide cache accounting and LRU eviction under a ``cache_limit``, shared by every process of a node.

State lives in a small memory-mapped file under the cache root (per dataset: keyed by its streams and shards):
bytes present per shard, bytes reserved by in-flight downloads, and last access times. Every change happens
under a kernel-released lock, with a "dirty" mark around it: a process killed in the middle leaves the mark,
and the next process rebuilds the state from the files actually on disk. Nothing here can go stale.

Eviction removes the least recently used shard that is (1) present, (2) not being read by any process (its
"in use" lock can be taken exclusively) and (3) of a stream whose data has a remote copy. Shards of local-only
streams are never evicted.

The slots are per shard id, but the shard manager accounts a file that several units share (a Parquet file's row
groups) under its first unit only: that slot holds the file's bytes, reservation, access time and lock, the other
units' slots stay 0, so a shared file counts once and is evicted as a whole.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from streaming_core.common.paths import coordination_dir
from streaming_core.errors import CacheLimitError
from streaming_core.storage.locking import RangeLocks

#: Seconds a download waits for cache room before a warning says why (the error comes at the cache's timeout).
WAIT_WARNING_AFTER = 10.0

__all__ = ['CacheState', 'CacheHooks', 'cache_key', 'mark_for_recount']

logger = logging.getLogger('streaming_core.reading.cache_limit')

_MAGIC = 0x5343434143484531  # 'SCCACHE1'
_HEADER = 4  # magic, num_shards, dirty, the last time (ns) a process waiting for room for a while tried again
_DIRTY = 2  # the header's slot: nonzero while an update is under way (a process killed then: recounted)
#: A process waiting this long for room tells the node (idle readers then give up their pins: see ``short_of_room``).
SHORT_OF_ROOM_AFTER = 1.0
#: The node-wide mark of that wait (its modification time), beside the cache accounts, whatever the waiter's account.
NODE_MARK = 'short-of-room'
_FRESH_NS = 500_000_000  # a wait is "still trying" this long after its last mark


def _touch(path: str) -> None:
    try:
        os.utime(path)
    except FileNotFoundError:
        try:
            open(path, 'a').close()
        except OSError:
            pass
    except OSError:
        pass


@dataclass
class CacheHooks:
    """What the cache needs to know about shards, supplied by the dataset."""

    scan: Callable[[int], int]              # bytes the shard occupies on disk now
    evictable: Callable[[int], bool]        # its stream has a remote copy
    try_lock_exclusive: Callable[[int], bool]  # take the shard's "in use" lock without waiting
    unlock: Callable[[int], None]           # release it
    remove: Callable[[int], int]            # delete the shard's files, return bytes freed


def cache_key(parts: list[str]) -> str:
    """A stable key for a dataset's cache state (from its streams' directories and shard names)."""
    digest = hashlib.blake2s(digest_size=12)
    for part in parts:
        digest.update(part.encode('utf-8'))
        digest.update(b'\0')
    return digest.hexdigest()


def mark_for_recount(path: str) -> bool:
    """Mark the account file ``path`` as mid-update, so the next process that opens it recounts it from the disk
    (``streaming cache clear`` removed the shards it counts); False when it is not an account. Processes that have it
    open keep using it: it is the same file for them and for the jobs that start after."""
    try:
        with open(path, 'r+b') as handle:
            header = np.frombuffer(handle.read(8 * _HEADER), dtype=np.int64)
            if len(header) != _HEADER or header[0] != _MAGIC:
                return False
            handle.seek(8 * _DIRTY)
            handle.write(np.int64(1).tobytes())
    except OSError:
        return False
    return True


class CacheState:
    """The node-wide view of a dataset's cache (open one per process; it is re-opened after unpickling).

    Args:
        key: The dataset's cache key (:func:`cache_key`).
        num_shards: The number of shards across all streams.
        limit: The cache limit in bytes.
        hooks: Callbacks into the dataset.
        timeout: How long a download may wait for space before :class:`CacheLimitError`.
    """

    def __init__(self, key: str, num_shards: int, limit: int, hooks: CacheHooks, timeout: float = 120.0) -> None:
        self.key = key
        self.num_shards = num_shards
        self.limit = int(limit)
        self.hooks = hooks
        self.timeout = timeout
        root = coordination_dir('cache-state')
        self.path = os.path.join(root, f'{key}.bin')
        self._node_mark = os.path.join(root, NODE_MARK)
        self._locks = RangeLocks.for_path(os.path.join(root, f'{key}.lock'))
        self._open()

    # ----------------------------------------------------------------------------------------------------------
    def _open(self) -> None:
        size = 8 * (_HEADER + 3 * self.num_shards)
        self._acquire()
        try:
            fresh = not os.path.exists(self.path) or os.path.getsize(self.path) != size
            if fresh:
                with open(self.path, 'wb') as handle:
                    handle.truncate(size)
            self._map = np.memmap(self.path, dtype=np.int64, mode='r+', shape=(_HEADER + 3 * self.num_shards,))
            n = self.num_shards
            self._header = self._map[:_HEADER]
            self.present = self._map[_HEADER:_HEADER + n]
            self.reserved = self._map[_HEADER + n:_HEADER + 2 * n]
            self.access = self._map[_HEADER + 2 * n:]
            if fresh or self._header[0] != _MAGIC or self._header[1] != n or self._header[_DIRTY]:
                self._rebuild()
        finally:
            self._release()

    def _acquire(self) -> None:
        self._locks.acquire(0, True, self.timeout, 'the cache state lock')

    def _release(self) -> None:
        self._locks.release(0)

    def _rebuild(self) -> None:
        """Recompute what is present from the files on disk (after a crash, or on first use)."""
        self._header[_DIRTY] = 1
        for shard in range(self.num_shards):
            self.present[shard] = self.hooks.scan(shard)
        self.reserved[:] = 0
        now = time.time_ns()
        self.access[:] = np.where(self.present > 0, now, 0)
        self._header[0] = _MAGIC
        self._header[1] = self.num_shards
        self._header[_DIRTY] = 0

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in ('_map', '_header', 'present', 'reserved', 'access', '_locks'):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._locks = RangeLocks.for_path(os.path.join(os.path.dirname(self.path), f'{self.key}.lock'))
        self._open()

    # ----------------------------------------------------------------------------------------------------------
    @property
    def usage(self) -> int:
        """Bytes present plus bytes reserved by in-flight downloads, node-wide."""
        return int(self.present.sum() + self.reserved.sum())

    def short_of_room(self) -> bool:
        """Whether a process of the node has waited for room for a while and is still trying (within 0.5 s): a
        reader of this dataset, or of any other (another projection or version of the same directory has its own
        account, but the files it cannot evict may be the ones this dataset holds)."""
        now = time.time_ns()
        stamp = int(self._header[3])
        if stamp > 0 and 0 <= now - stamp < _FRESH_NS:
            return True
        try:
            mark = os.stat(self._node_mark).st_mtime_ns
        except OSError:
            return False
        return 0 <= now - mark < _FRESH_NS

    def touch(self, shard: int) -> None:
        """Record an access of a prepared shard (no lock: one aligned 8-byte store), and count it if the account does
        not (see :meth:`_count_found`)."""
        self.access[shard] = time.time_ns()
        if self.present[shard] <= 0 and self.reserved[shard] <= 0:
            self._count_found(shard)

    def _count_found(self, shard: int) -> None:
        """Count a shard found on disk that the account does not: one a job without a cache limit downloaded into
        the same directories since the account was built (the account is recounted from the disk only when it is
        new or was left mid-update); cold shards are evicted then if the cache is over its limit."""
        self._acquire()
        try:
            if self.present[shard] <= 0 and self.reserved[shard] <= 0:
                self._header[_DIRTY] = 1  # mid-update: a process killed here leaves the account to be recounted
                self.present[shard] = self.hooks.scan(shard)
                if self.usage > self.limit:
                    self._evict_for(shard, int(self.present[shard]))
                self._header[_DIRTY] = 0
        finally:
            self._release()

    def reserve(self, shard: int, size: int, on_wait: Callable[[], None] | None = None,
                timeout: float | None = None) -> None:
        """Reserve ``size`` bytes for the shard's download, evicting cold shards as needed.

        When nothing can be evicted yet (every present shard is in use), ``on_wait`` is called and the reservation
        retried with growing sleeps, so the caller's own reader can release what it holds. ``timeout`` (default: the
        cache's) bounds the whole wait.

        Raises:
            CacheLimitError: when no space could be freed within the timeout (every other shard is in use, or
                belongs to a stream without a remote copy).
        """
        started = time.monotonic()
        deadline = started + (self.timeout if timeout is None else timeout)
        delay = 0.005
        warned = False
        while True:
            self._acquire()
            try:
                self._header[_DIRTY] = 1
                done = self._try_reserve(shard, int(size))
                self._header[_DIRTY] = 0
            finally:
                self._release()
            if done:
                return
            if on_wait is not None:
                on_wait()
            now = time.monotonic()
            if now - started >= SHORT_OF_ROOM_AFTER:
                self._header[3] = time.time_ns()  # one aligned store: no lock
                _touch(self._node_mark)
            if not warned and now - started >= WAIT_WARNING_AFTER:
                warned = True
                warnings.warn(
                    f'Waiting {now - started:.0f} s for room in the cache for shard {shard} ({size} bytes; limit '
                    f'{self.limit} bytes for shards, {self.usage} held by shards in use on this node): the processes '
                    f'reading on this node hold more than the limit. Raise cache_limit or use fewer DataLoader '
                    f'workers; this fails with CacheLimitError after {deadline - started:.0f} s.',
                    RuntimeWarning, stacklevel=2)
            if now >= deadline:
                raise CacheLimitError(
                    f'Cache limit of {self.limit} bytes (for shards) cannot fit shard {shard} ({size} bytes): '
                    f'{self.usage} bytes are held by shards being read or downloaded on this node, or by local-only '
                    f'streams that are never evicted. Each reading process (rank or DataLoader worker) needs room '
                    f'for at least one shard: raise cache_limit or use fewer workers.')
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _claim(self, shard: int, size: int) -> None:
        """Record the reservation and hold its lock (kernel-released: a dead holder's reservation is recognisable)."""
        self._locks.try_acquire(1 + shard, True)
        self.reserved[shard] = size

    def _try_reserve(self, shard: int, size: int) -> bool:
        own = int(self.present[shard] + self.reserved[shard])
        used = int(self.present.sum() + self.reserved.sum()) - own
        if used + size <= self.limit:
            self._claim(shard, size)
            return True
        self._drop_dead_reservations(shard)
        if self._evict_for(shard, size) + size <= self.limit:
            self._claim(shard, size)
            return True
        return False

    def _evict_for(self, shard: int, size: int) -> int:
        """Evict the least recently used shards that may be and are not in use (never ``shard``) until ``size`` bytes
        fit beside the others; returns the bytes the others then hold (call under the state lock)."""
        own = int(self.present[shard] + self.reserved[shard])
        used = int(self.present.sum() + self.reserved.sum()) - own
        order = np.argsort(self.access, kind='stable')
        for victim in order.tolist():
            if used + size <= self.limit:
                break
            if victim == shard or self.present[victim] <= 0 or not self.hooks.evictable(victim):
                continue
            if not self.hooks.try_lock_exclusive(victim):
                continue  # being read right now
            try:
                self.hooks.remove(victim)
            finally:
                self.hooks.unlock(victim)
            used -= int(self.present[victim])
            self.present[victim] = 0
            self.access[victim] = 0
        return used

    def _drop_dead_reservations(self, shard: int) -> None:
        """Drop reservations whose process is gone (nobody holds the reservation's lock); a process killed between
        its download and its commit may have left the files, so count what is on disk."""
        for other in np.flatnonzero(self.reserved > 0).tolist():
            if other == shard or self._locks.held(1 + other) or not self._locks.try_acquire(1 + other, True):
                continue  # reserved by a live process (this one or another)
            self._locks.release(1 + other)
            self.reserved[other] = 0
            self.present[other] = self.hooks.scan(other)

    def commit(self, shard: int) -> None:
        """The shard is prepared: record its real size, drop its reservation."""
        self._acquire()
        try:
            self.present[shard] = self.hooks.scan(shard)
            self.reserved[shard] = 0
            self.access[shard] = time.time_ns()
            self._locks.release(1 + shard)
        finally:
            self._release()

    def cancel(self, shard: int) -> None:
        """The shard's preparation failed: drop its reservation."""
        self._acquire()
        try:
            self.reserved[shard] = 0
            self.present[shard] = self.hooks.scan(shard)
            self._locks.release(1 + shard)
        finally:
            self._release()

    def evict(self, shard: int) -> int:
        """Remove one shard now (if evictable and not in use); returns the bytes freed."""
        if not self.hooks.evictable(shard):
            return 0
        self._acquire()
        try:
            if not self.hooks.try_lock_exclusive(shard):
                return 0
            try:
                freed = self.hooks.remove(shard)
            finally:
                self.hooks.unlock(shard)
            self.present[shard] = 0
            self.access[shard] = 0
            return freed
        finally:
            self._release()

    def evict_coldest(self) -> int:
        """Remove the least recently used evictable shard not in use; returns its id, or -1."""
        candidates = [s for s in np.argsort(self.access, kind='stable').tolist() if self.present[s] > 0]
        for shard in candidates:
            if self.evict(shard):
                return shard
        return -1

    def refresh(self) -> None:
        """Rebuild from disk now (used by ``streaming cache`` and tests)."""
        self._acquire()
        try:
            self._rebuild()
        finally:
            self._release()
