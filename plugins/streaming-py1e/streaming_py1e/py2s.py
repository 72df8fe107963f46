"""The reference's ``py2s`` shuffle (two intra-shard passes), bit-exact (runtime.md 4.5).

1. With ``run_rng = default_rng(seed)``: shuffle the list of units, then shuffle each unit's samples, in that
   order.
2. Split the concatenation at the canonical boundaries ``N*(c+1)//NCN`` (a split unit keeps its first, already
   shuffled, samples in the earlier node).
3. With ``epoch_rng = default_rng(seed + epoch)``, for each node in order: shuffle its piece list, then shuffle each
   piece's samples in the new order.
4. Concatenate. ``block_size`` is ignored.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streaming_py1e.spans import check_shuffle_args, divide_spans, unit_spans

__all__ = ['Py2s']


class Py2s:
    """``py2s``: callable ``(shard_sizes, NCN, seed, epoch, block_size) -> permutation``."""

    name = 'py2s'
    splits_canonical_nodes = True  # shuffles within canonical nodes: 64 of them per physical node by default
    spreads_shards_within_block = False

    def __call__(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                 epoch: int, block_size: int = 1 << 18) -> NDArray[np.int64]:
        """The full permutation of ``0..N-1``."""
        sizes = check_shuffle_args(shard_sizes, num_canonical_nodes, seed, epoch)
        begins, sizes = unit_spans(sizes)
        total = int(sizes.sum())
        run_rng = np.random.default_rng(seed)
        order = np.arange(len(sizes), dtype=np.int64)
        run_rng.shuffle(order)  # the same draws as shuffling the list of units
        flat = np.empty(total, np.int64)
        offset = 0
        for unit in order.tolist():
            size = int(sizes[unit])
            view = flat[offset:offset + size]
            view[:] = np.arange(begins[unit], begins[unit] + size)
            run_rng.shuffle(view)
            offset += size
        flat_begins, flat_sizes = unit_spans(sizes[order])  # the units' places in ``flat``
        pieces = divide_spans(flat_begins, flat_sizes, total, int(num_canonical_nodes))
        epoch_rng = np.random.default_rng(seed + epoch)
        out = np.empty(total, np.int64)
        offset = 0
        for c in range(int(num_canonical_nodes)):
            piece_begins, piece_sizes = pieces.node(c)
            perm = np.arange(len(piece_sizes))
            epoch_rng.shuffle(perm)
            for begin, size in zip(piece_begins[perm].tolist(), piece_sizes[perm].tolist(), strict=True):
                view = out[offset:offset + size]
                view[:] = flat[begin:begin + size]
                epoch_rng.shuffle(view)
                offset += size
        return out

    def __repr__(self) -> str:
        return '<shuffle py2s>'
