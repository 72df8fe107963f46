"""The reference's py1 shuffles, bit-exact: ``py1s``, ``py1b`` (legacy), ``py1br`` and ``py1e`` (runtime.md 4).

Each is written as a walk over canonical nodes that shares one epoch rng (``default_rng(seed + epoch)``), in the
reference's call order. A walk either *materialises* a node (writes its share of the permutation) or *replays*
it (advances the rng exactly as materialising would, see :mod:`streaming_py1e.replay`). So:

* ``algo(shard_sizes, NCN, seed, epoch, block_size)`` is the full permutation (every node materialised);
* ``algo.node_share(..., node)`` / ``algo.nodes_share(..., nodes)`` materialise only the wanted nodes: the
  result is identical to the slice of the full permutation, memory is O(those nodes' samples + largest shard),
  and time is O(samples of the nodes up to the last wanted one), with cheap per-sample replay for the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from streaming_py1e.replay import Scratch, skip_uniform
from streaming_py1e.spans import Spans, check_shuffle_args, py1_spans

__all__ = ['NodeWalkShuffle', 'Py1s', 'Py1b', 'Py1br', 'Py1e', 'py1br_blocks']

Sink = Callable[[int], 'NDArray[np.integer] | None']


def _check_block(name: str, block_size: int) -> int:
    if block_size is None or int(block_size) < 1:
        raise ValueError(f'{name} needs a positive shuffle_block_size, got {block_size!r}. Leave '
                         f'shuffle_block_size unset for the default, or pass a positive number of samples.')
    return int(block_size)


class NodeWalkShuffle:
    """Base of the walk-structured shuffles: ``__call__``, ``node_share`` and ``nodes_share``.

    The declared properties the planner reads (``docs/plugins/hooks.md``) default to False here; a subclass sets
    ``splits_canonical_nodes`` when it shuffles only within a canonical node's spans (its default
    ``num_canonical_nodes`` is then 64 per physical node) and ``spreads_shards_within_block`` when a shard larger
    than ``block_size`` is shuffled less (the planner then warns, whether or not the plan is cached).
    """

    name = ''
    splits_canonical_nodes = False
    spreads_shards_within_block = False

    def prepare(self, sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                block_size: int) -> tuple[Spans, np.random.Generator, dict]:
        """Validate and run the common prefix. Returns ``(spans, epoch_rng, per-walk state)``."""
        epoch_rng = np.random.default_rng(seed + epoch)
        return py1_spans(sizes, num_canonical_nodes, seed, epoch_rng), epoch_rng, {}

    def walk_node(self, spans: Spans, c: int, rng: np.random.Generator, state: dict, block_size: int,
                  out: NDArray[np.integer] | None, scratch: Scratch) -> None:
        """Materialise node ``c`` into ``out`` (its positions), or replay it when ``out`` is None."""
        raise NotImplementedError

    def finish(self, state: dict) -> None:
        """Called after the walk."""

    def _walk(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int, epoch: int,
              block_size: int, wanted: Iterable[int], sink: Sink) -> None:
        sizes = check_shuffle_args(shard_sizes, num_canonical_nodes, seed, epoch)
        wanted = sorted(set(int(c) for c in wanted))
        for c in wanted:
            if not 0 <= c < num_canonical_nodes:
                raise ValueError(f'Canonical node {c} is out of range for {num_canonical_nodes} canonical nodes.')
        spans, rng, state = self.prepare(sizes, int(num_canonical_nodes), seed, epoch, block_size)
        scratch = Scratch()
        wanted_set = set(wanted)
        last = wanted[-1] if wanted else -1
        for c in range(last + 1):
            self.walk_node(spans, c, rng, state, block_size, sink(c) if c in wanted_set else None, scratch)
        self.finish(state)

    def __call__(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                 epoch: int, block_size: int = 1 << 18) -> NDArray[np.int64]:
        """The full permutation of ``0..N-1`` (canonical position -> big sample ID)."""
        sizes = np.asarray(shard_sizes, dtype=np.int64)
        total = int(sizes.sum()) if sizes.ndim == 1 else 0
        out = np.empty(total, np.int64)
        ncn = int(num_canonical_nodes)

        def sink(c: int) -> NDArray[np.int64]:
            return out[c * total // ncn:(c + 1) * total // ncn]

        self._walk(shard_sizes, ncn, seed, epoch, block_size, range(ncn), sink)
        return out

    def nodes_share(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                    epoch: int, block_size: int, nodes: Iterable[int],
                    dtype: type = np.int64) -> dict[int, NDArray[np.integer]]:
        """The permutation's slices for several canonical nodes, in one walk. ``dtype`` may be ``np.uint32``
        when the sample count is below 2**32 (halves the memory).
        """
        sizes = np.asarray(shard_sizes, dtype=np.int64)
        total = int(sizes.sum()) if sizes.ndim == 1 else 0
        ncn = int(num_canonical_nodes)
        shares: dict[int, NDArray[np.integer]] = {}

        def sink(c: int) -> NDArray[np.integer]:
            shares[c] = np.empty((c + 1) * total // ncn - c * total // ncn, dtype)
            return shares[c]

        self._walk(shard_sizes, ncn, seed, epoch, block_size, nodes, sink)
        return shares

    def node_share(self, shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                   epoch: int, block_size: int, node: int) -> NDArray[np.int64]:
        """The permutation's slice for canonical node ``node`` (positions ``[node*N//NCN, (node+1)*N//NCN)``)."""
        return self.nodes_share(shard_sizes, num_canonical_nodes, seed, epoch, block_size, [node])[int(node)]

    def __repr__(self) -> str:
        return f'<shuffle {self.name}>'


def _layout(begins: NDArray[np.int64], sizes: NDArray[np.int64], out: NDArray[np.integer]) -> None:
    offset = 0
    for begin, size in zip(begins.tolist(), sizes.tolist(), strict=True):
        out[offset:offset + size] = np.arange(begin, begin + size)
        offset += size


class Py1s(NodeWalkShuffle):
    """``py1s``: shuffled shard spans per node, each span shuffled in place (``block_size`` is ignored)."""

    name = 'py1s'
    splits_canonical_nodes = True

    def walk_node(self, spans: Spans, c: int, rng: np.random.Generator, state: dict, block_size: int,
                  out: NDArray[np.integer] | None, scratch: Scratch) -> None:
        """Shuffle each of the node's spans, in order."""
        begins, sizes = spans.node(c)
        offset = 0
        for begin, size in zip(begins.tolist(), sizes.tolist(), strict=True):
            if out is None:
                scratch.shuffle(rng, size)
            else:
                view = out[offset:offset + size]
                view[:] = np.arange(begin, begin + size)
                rng.shuffle(view)
            offset += size


class Py1b(NodeWalkShuffle):
    """Legacy ``py1b`` (removed from the reference in 0.11): fixed blocks of ``block_size`` shuffled per node."""

    name = 'py1b'

    def walk_node(self, spans: Spans, c: int, rng: np.random.Generator, state: dict, block_size: int,
                  out: NDArray[np.integer] | None, scratch: Scratch) -> None:
        """Lay the spans out, then shuffle ``[k*b, min((k+1)*b, m))`` blocks."""
        block = _check_block('py1b', block_size)
        begins, sizes = spans.node(c)
        total = int(sizes.sum())
        if out is not None:
            _layout(begins, sizes, out)
        for lo in range(0, total, block):
            hi = min(lo + block, total)
            if out is None:
                scratch.shuffle(rng, hi - lo)
            else:
                rng.shuffle(out[lo:hi])


def py1br_blocks(total: int, stagger: int, draw: Callable[[], int]) -> list[tuple[int, int]]:
    """py1br's blocks of one node of ``total`` samples: ``[max(end-st, 0), min(end+r-st, total))`` with ``r = draw()``.

    ``end`` advances by the *clipped* length, so the first two blocks overlap by ``stagger`` samples (the
    reference's quirk): ``total=300, stagger=30, r=100`` gives ``(0,70), (40,140), (140,240), (240,300)``.
    """
    cuts = []
    end = 0
    while end < total:
        size = draw()
        lo = max(end - stagger, 0)
        hi = min(end + size - stagger, total)
        cuts.append((lo, hi))
        end += hi - lo
    return cuts


class Py1br(NodeWalkShuffle):
    """``py1br``: randomly sized, staggered blocks per node (with the reference's first-block overlap)."""

    name = 'py1br'

    def prepare(self, sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                block_size: int) -> tuple[Spans, np.random.Generator, dict]:
        """The py1 prefix, then one ``integers(0, int(0.75b), size=NCN)`` call for the staggers.

        Block sizes below 2 act as 2 (the reference raises inside numpy for 1, since ``int(0.75) == 0``).
        """
        block = max(_check_block('py1br', block_size), 2)
        spans, rng, state = super().prepare(sizes, num_canonical_nodes, seed, epoch, block)
        state['stagger'] = rng.integers(0, int(0.75 * block), size=num_canonical_nodes)
        state['block'] = block
        return spans, rng, state

    def walk_node(self, spans: Spans, c: int, rng: np.random.Generator, state: dict, block_size: int,
                  out: NDArray[np.integer] | None, scratch: Scratch) -> None:
        """Cut the node into blocks ``[max(end-st, 0), min(end+r-st, m))``, then shuffle each block."""
        block = state['block']
        begins, sizes = spans.node(c)
        total = int(sizes.sum())
        stagger = int(state['stagger'][c])
        if out is not None:
            _layout(begins, sizes, out)
        low, high = int(0.75 * block), int(1.25 * block)
        for lo, hi in py1br_blocks(total, stagger, lambda: int(rng.integers(low, high))):
            if out is None:
                scratch.shuffle(rng, hi - lo)
            else:
                rng.shuffle(out[lo:hi])


class Py1e(NodeWalkShuffle):
    """``py1e`` (the default): each shard's samples spread over a window of about ``block_size`` positions."""

    name = 'py1e'
    spreads_shards_within_block = True

    def prepare(self, sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                block_size: int) -> tuple[Spans, np.random.Generator, dict]:
        """The py1 prefix; refuses canonical nodes without samples."""
        block = _check_block('py1e', block_size)
        spans, rng, state = super().prepare(sizes, num_canonical_nodes, seed, epoch, block)
        if num_canonical_nodes > int(sizes.sum()):
            raise ValueError(f'The number of samples assigned to a canonical node is 0. Either increase the number '
                             f'of samples or reduce num_canonical_nodes ({int(sizes.sum())} samples over '
                             f'{num_canonical_nodes} canonical nodes).')
        return spans, rng, state

    def walk_node(self, spans: Spans, c: int, rng: np.random.Generator, state: dict, block_size: int,
                  out: NDArray[np.integer] | None, scratch: Scratch) -> None:
        """Shuffle the spans, jitter each span's positions by ``uniform`` within its window, argsort."""
        begins, sizes = spans.node(c)
        size_list = sizes.tolist()
        total = sum(size_list)
        if out is None:
            for size in size_list:
                scratch.shuffle(rng, size)
        else:
            samples = np.empty(total, np.int64)
            _layout(begins, sizes, samples)
            offset = 0
            for size in size_list:
                rng.shuffle(samples[offset:offset + size])
                offset += size
            positions = np.arange(total).astype(np.float64)
        low, high = int(0.75 * block_size), int(1.25 * block_size)
        offset = 0
        for size in size_list:
            draw = rng.integers(low, high)
            cut = (draw - size) / 2
            if cut < 0:
                cut = 0  # a shard larger than its window: the planner warns (order_warnings)
            left = max(-cut, -offset)
            right = min(cut, total - offset - size)
            if out is None:
                skip_uniform(rng, size)
            else:
                positions[offset:offset + size] += rng.uniform(left, right, size)
            offset += size
        if out is not None:
            order = np.argsort(positions)
            del positions
            if out.dtype == np.int64:
                np.take(samples, order, out=out)
            else:
                out[:] = samples[order]
