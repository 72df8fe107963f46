"""Map a global sample id to ``(shard id, index within the shard)``."""

from __future__ import annotations

import bisect

import numpy as np
from numpy.typing import NDArray

__all__ = ['Spanner']

_LIST_MAX = 1 << 16


class Spanner:
    """Binary search over shard boundaries: O(num_shards) memory, O(log num_shards) per lookup.

    Replaces the reference's per-sample table of ``span_size`` spans (which cost O(num_samples) memory in every
    process), so it takes no ``span_size``.

    Args:
        shard_sizes: The sample count of every shard, in global shard order.
        ends: Their cumulative sums, when the caller has them already (they are then shared, not copied).
    """

    def __init__(self, shard_sizes: NDArray[np.int64] | list[int], ends: NDArray[np.int64] | None = None) -> None:
        self.shard_sizes = np.asarray(shard_sizes, dtype=np.int64)
        # An array, not a list: nothing per shard at 10^6 shards.
        self._ends = np.cumsum(self.shard_sizes) if ends is None else ends
        self.num_samples = int(self._ends[-1]) if self._ends.size else 0
        # Small tables also as a list: bisect on a list beats numpy's per-call overhead for one id.
        self._ends_list = self._ends.tolist() if self._ends.size <= _LIST_MAX else None

    def __getitem__(self, index: int) -> tuple[int, int]:
        """``(shard id, index within the shard)`` of a global sample id."""
        if not 0 <= index < self.num_samples:
            raise IndexError(f'Invalid sample index {index}: must be in [0, {self.num_samples}).')
        ends = self._ends_list
        if ends is not None:
            shard = bisect.bisect_right(ends, index)
            return shard, index - (ends[shard - 1] if shard else 0)
        shard = int(self._ends.searchsorted(index, 'right'))
        return shard, index - (int(self._ends[shard - 1]) if shard else 0)

    def locate(self, ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Vectorised lookup of many ids: ``(shard ids, indices within shards)``."""
        ends = self._ends
        shards = np.searchsorted(ends, ids, side='right')
        starts = np.concatenate([[0], ends[:-1]])
        return shards.astype(np.int64), (ids - starts[shards]).astype(np.int64)
