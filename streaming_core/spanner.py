"""Map a global sample id to ``(shard id, index within the shard)``."""

from __future__ import annotations

import bisect

import numpy as np
from numpy.typing import NDArray

__all__ = ['Spanner']


class Spanner:
    """Binary search over shard boundaries: O(num_shards) memory, O(log num_shards) per lookup.

    Replaces the reference's per-sample table (which cost O(num_samples) memory in every process).
    """

    def __init__(self, shard_sizes: NDArray[np.int64] | list[int], span_size: int = 1 << 10) -> None:
        self.shard_sizes = np.asarray(shard_sizes, dtype=np.int64)
        self._ends = np.cumsum(self.shard_sizes).tolist()
        self.num_samples = self._ends[-1] if self._ends else 0

    def __getitem__(self, index: int) -> tuple[int, int]:
        """``(shard id, index within the shard)`` of a global sample id."""
        if not 0 <= index < self.num_samples:
            raise IndexError(f'Invalid sample index {index}: must be in [0, {self.num_samples}).')
        shard = bisect.bisect_right(self._ends, index)
        return shard, index - (self._ends[shard - 1] if shard else 0)

    def locate(self, ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Vectorised lookup of many ids: ``(shard ids, indices within shards)``."""
        ends = np.asarray(self._ends, dtype=np.int64)
        shards = np.searchsorted(ends, ids, side='right')
        starts = np.concatenate([[0], ends[:-1]])
        return shards.astype(np.int64), (ids - starts[shards]).astype(np.int64)
