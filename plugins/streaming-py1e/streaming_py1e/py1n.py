"""``py1n``: py1e's shuffle quality with random streams keyed per canonical node, so one node's share costs
O(that node's samples) time and memory (plus O(number of shards)).

The reference shuffles draw every canonical node from one epoch rng, so computing node ``c`` needs the draws of
all nodes before it. ``py1n`` keeps py1e's idea and changes only where the randomness comes from:

1. **Run order** (seed only, O(units)): the units are shuffled with ``default_rng(seed)`` and split at the canonical
   boundaries ``N*(c+1)//NCN`` exactly as py1e does, so each canonical node owns the same sample set every epoch.
2. **Node rng**: ``Generator(PCG64(SeedSequence([TAG, node_lo, node_hi, epoch_lo, epoch_hi, *seed_words])))``, with
   :data:`TAG` a fixed domain tag and each number split into little-endian uint32 words (the fixed layout keeps
   distinct ``(seed, epoch, node)`` apart; plain ``[seed, epoch, node]`` would collide, since SeedSequence pads
   short entropy with zeros).
3. With the node rng: permute the node's span list; then for each span in the new order draw
   ``r = integers(int(0.75b), max(int(1.25b), int(0.75b) + 1))``, the span's sample order ``begin +
   permutation(size)``, and ``uniform(lo, hi, size)`` jitter, where ``cut = max((r - size) / 2, 0)``,
   ``lo = max(-cut, -offset)`` and ``hi = min(cut, m - offset - size)`` (py1e's window rule).
4. The node's output is its samples ordered by ``(offset + i + jitter_i, layout index)``: a total order, so the
   result does not depend on how the sort is chunked.

The sort streams: keys of later spans are at least ``offset - r/2``, so everything below that threshold is final
and is written out; only a window of about ``block_size`` samples is kept pending. Memory beyond the output is
O(chunk + block_size + largest shard).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray

from streaming_py1e.spans import Spans, check_shuffle_args, py1_spans

__all__ = ['Py1n', 'TAG', 'node_rng']

#: Domain tag of the node rngs (ASCII "py1n").
TAG = 0x7079316E
_CHUNK = 1 << 20


def _words(value: int) -> list[int]:
    words = [value & 0xFFFFFFFF]
    value >>= 32
    while value:
        words.append(value & 0xFFFFFFFF)
        value >>= 32
    return words


def node_rng(seed: int, epoch: int, node: int) -> np.random.Generator:
    """The rng of canonical node ``node`` in ``epoch`` (independent of every other node and epoch)."""
    if min(seed, epoch, node) < 0:
        raise ValueError(f'seed, epoch and node must be non-negative, got {seed}, {epoch}, {node}.')
    fixed = [TAG, node & 0xFFFFFFFF, (node >> 32) & 0xFFFFFFFF, epoch & 0xFFFFFFFF, (epoch >> 32) & 0xFFFFFFFF]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(fixed + _words(int(seed)))))


class Py1n:
    """``py1n``: ``__call__`` (full permutation), ``node_share`` and ``nodes_share`` (one node in O(its size))."""

    name = 'py1n'
    splits_canonical_nodes = False
    spreads_shards_within_block = True  # a shard larger than its window is shuffled less: the planner warns

    @staticmethod
    def _block(block_size: int) -> tuple[int, int]:
        if block_size is None or int(block_size) < 1:
            raise ValueError(f'py1n needs a positive shuffle_block_size, got {block_size!r}.')
        low = int(0.75 * int(block_size))
        return low, max(int(1.25 * int(block_size)), low + 1)

    def spans(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
              epoch: int) -> Spans:
        """The run-ordered spans of every canonical node (O(units))."""
        sizes = check_shuffle_args(shard_sizes, num_canonical_nodes, seed, epoch)
        return py1_spans(sizes, int(num_canonical_nodes), seed, None)

    def fill_node(self, spans: Spans, node: int, seed: int, epoch: int, block_size: int,
                  out: NDArray[np.integer]) -> bool:
        """Write canonical node ``node``'s share into ``out``; return whether a shard exceeded its window."""
        low, high = self._block(block_size)
        begins, sizes = spans.node(node)
        total = int(sizes.sum())
        if len(out) != total:
            raise ValueError(f'Output has {len(out)} slots for a canonical node of {total} samples.')
        rng = node_rng(seed, epoch, node)
        perm = rng.permutation(len(sizes))
        begins, sizes = begins[perm], sizes[perm]
        chunk = max(_CHUNK, 4 * high)
        margin = high / 2 + 1
        pending_keys = np.zeros(0, np.float64)
        pending_vals = np.zeros(0, np.int64)
        new_keys: list[NDArray[np.float64]] = []
        new_vals: list[NDArray[np.int64]] = []
        clipped = False
        offset = emitted = gathered = 0
        for k, (begin, size) in enumerate(zip(begins.tolist(), sizes.tolist(), strict=True)):
            draw = int(rng.integers(low, high))
            cut = (draw - size) / 2
            if cut < 0:
                cut = 0.0
                clipped = True
            left = max(-cut, -offset)
            right = min(cut, total - offset - size)
            new_vals.append(begin + rng.permutation(size))
            new_keys.append(np.arange(offset, offset + size, dtype=np.float64) + rng.uniform(left, right, size))
            offset += size
            gathered += size
            last = k == len(sizes) - 1
            if gathered < chunk and not last:
                continue
            keys = np.concatenate([pending_keys, *new_keys])
            vals = np.concatenate([pending_vals, *new_vals])
            new_keys, new_vals, gathered = [], [], 0
            order = np.argsort(keys, kind='stable')
            keys = keys[order]
            vals = vals[order]
            del order
            ready = len(keys) if last else int(np.searchsorted(keys, offset - margin, side='left'))
            out[emitted:emitted + ready] = vals[:ready]
            emitted += ready
            pending_keys, pending_vals = keys[ready:], vals[ready:]
        return clipped

    def nodes_share(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                    epoch: int, block_size: int, nodes: Iterable[int],
                    dtype: type = np.int64) -> dict[int, NDArray[np.integer]]:
        """The permutation's slices for the given canonical nodes (``dtype`` may be ``np.uint32`` below 2**32)."""
        spans = self.spans(shard_sizes, num_canonical_nodes, seed, epoch)
        shares = {}
        for node in sorted(set(int(c) for c in nodes)):
            if not 0 <= node < spans.num_nodes:
                raise ValueError(f'Canonical node {node} is out of range for {spans.num_nodes} canonical nodes.')
            lo, hi = spans.node_range(node)
            shares[node] = np.empty(hi - lo, dtype)
            self.fill_node(spans, node, seed, epoch, block_size, shares[node])
        return shares

    def node_share(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                   epoch: int, block_size: int, node: int) -> NDArray[np.int64]:
        """The permutation's slice for canonical node ``node`` (positions ``[node*N//NCN, (node+1)*N//NCN)``)."""
        return self.nodes_share(shard_sizes, num_canonical_nodes, seed, epoch, block_size, [node])[int(node)]

    def __call__(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                 epoch: int, block_size: int = 1 << 18) -> NDArray[np.int64]:
        """The full permutation of ``0..N-1`` (the node shares concatenated in canonical order)."""
        spans = self.spans(shard_sizes, num_canonical_nodes, seed, epoch)
        out = np.empty(spans.num_samples, np.int64)
        for node in range(spans.num_nodes):
            lo, hi = spans.node_range(node)
            self.fill_node(spans, node, seed, epoch, block_size, out[lo:hi])
        return out

    def __repr__(self) -> str:
        return '<shuffle py1n>'
