"""Downloads and cache occupancy of one node, from its access stream.

* **Unlimited cache**: a shard is downloaded at its first access and kept (vectorised).
* **Cache limit**: least-recently-used eviction of whole shards (at their raw size) as soon as a download would
  pass the limit, which is how the node's shared cache behaves when it is full. The index file counts against the
  limit, as in the library. (Shards are accounted when they are read; prefetching ``predownload`` samples ahead
  brings them in a little earlier.)
* **Minimum cache**: the most bytes a node holds at once if every shard stays from its first to its last access
  within an epoch: the smallest limit that avoids re-downloads inside an epoch under an ideal policy (LRU may need
  more). Keeping every shard a node ever reads avoids re-downloads across epochs too, under any policy; that sum is
  never below the minimum. The report adds the index to both, since it counts against the limit.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streaming_core.tools.simulation.access import AccessStream

__all__ = ['NodeDownloads', 'node_downloads', 'min_cache_bytes']


@dataclass
class NodeDownloads:
    """One node's downloads.

    Attributes:
        steps: The step at which each downloaded shard is needed (non-decreasing).
        shards: The shard of each download.
        occupancy: Cache bytes (shards only) right after each download, evictions included.
    """

    steps: NDArray[np.int64]
    shards: NDArray[np.int64]
    occupancy: NDArray[np.int64]

    @property
    def count(self) -> int:
        """Number of downloads."""
        return len(self.shards)


def _first_last(shards: NDArray[np.int64], num_shards: int) -> tuple[NDArray[np.int64], NDArray[np.int64],
                                                                     NDArray[np.int64]]:
    """``(shards read, index of each one's first access, index of its last access)`` in O(n)."""
    n = len(shards)
    position = np.arange(n, dtype=np.int64)
    first = np.full(num_shards, n, np.int64)
    np.minimum.at(first, shards, position)
    last = np.full(num_shards, -1, np.int64)
    np.maximum.at(last, shards, position)
    read = np.flatnonzero(last >= 0)
    return read, first[read], last[read]


def _unlimited(stream: AccessStream, raw: NDArray[np.int64]) -> NodeDownloads:
    read, first, _ = _first_last(stream.shards, len(raw))
    order = np.argsort(first, kind='stable')
    first, read = first[order], read[order]
    return NodeDownloads(stream.steps[first], read, np.cumsum(raw[read]))


def _lru(stream: AccessStream, raw: NDArray[np.int64], budget: int) -> NodeDownloads:
    sizes = raw.tolist()
    cache: OrderedDict[int, int] = OrderedDict()
    move, pop = cache.move_to_end, cache.popitem
    used = 0
    misses: list[int] = []
    occupancy: list[int] = []
    for i, shard in enumerate(stream.shards.tolist()):
        if shard in cache:
            move(shard)
            continue
        size = sizes[shard]
        used += size
        while used > budget and cache:
            used -= pop(last=False)[1]
        cache[shard] = size
        misses.append(i)
        occupancy.append(used)
    index = np.asarray(misses, np.int64)
    return NodeDownloads(stream.steps[index], stream.shards[index], np.asarray(occupancy, np.int64))


def node_downloads(stream: AccessStream, raw: NDArray[np.int64], budget: int | None) -> NodeDownloads:
    """The node's downloads with ``budget`` bytes for shards (None: unlimited).

    With a budget, a node that never needs more than the budget is computed the unlimited (vectorised) way; only a
    node that must evict runs the LRU walk over its access stream.
    """
    if budget is None or not len(stream.shards):
        return _unlimited(stream, raw)
    touched = np.bincount(stream.shards, minlength=len(raw)) > 0
    if int(raw[touched].sum()) <= budget:
        return _unlimited(stream, raw)
    return _lru(stream, raw, budget)


def min_cache_bytes(stream: AccessStream, raw: NDArray[np.int64]) -> int:
    """The peak of bytes live when each shard is kept from its first to its last access within each epoch."""
    peak = 0
    bounds = np.searchsorted(stream.steps, stream.epoch_starts)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        steps, shards = stream.steps[lo:hi], stream.shards[lo:hi]
        if not len(shards):
            continue
        unique, first, last = _first_last(shards, len(raw))
        size = raw[unique]
        # Additions at a shard's first step; removals the step after its last one (processed before additions).
        times = np.concatenate([steps[first] * 2 + 1, (steps[last] + 1) * 2])
        deltas = np.concatenate([size, -size])
        order = np.argsort(times, kind='stable')
        peak = max(peak, int(np.cumsum(deltas[order]).max()))
    return peak
