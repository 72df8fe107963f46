"""Shard spans shared by the py1 shuffle family (moved here from ``streaming_core.spans``, which only this plugin
used): the run-constant shard order and its split over canonical nodes.

A *span* is a contiguous range of big sample IDs ``[begin, begin + size)`` (a shuffle unit, or a piece of one).
The py1 shuffles (runtime.md 4.2-4.7) start the same way: shuffle the units with ``default_rng(seed)``, split
that list at the canonical node boundaries ``N*(c+1)//NCN`` (:func:`divide_spans`; a unit crossing a boundary
keeps its first part in the earlier node), then shuffle each node's span list with the epoch rng.

Everything here is O(number of units + NCN); it never touches individual samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ['Spans', 'unit_spans', 'run_order', 'divide_spans', 'py1_spans', 'check_shuffle_args']


@dataclass
class Spans:
    """Spans laid out in canonical order, grouped by canonical node.

    Attributes:
        begins: The first big ID of each span.
        sizes: Each span's size.
        bounds: ``NCN + 1`` span indices: node ``c`` owns spans ``[bounds[c], bounds[c+1])``.
        num_samples: The total size ``N``.
    """

    begins: NDArray[np.int64]
    sizes: NDArray[np.int64]
    bounds: NDArray[np.int64]
    num_samples: int

    @property
    def num_nodes(self) -> int:
        """The number of canonical nodes."""
        return len(self.bounds) - 1

    def node(self, c: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(begins, sizes)`` of canonical node ``c``'s spans, in order."""
        lo, hi = int(self.bounds[c]), int(self.bounds[c + 1])
        return self.begins[lo:hi], self.sizes[lo:hi]

    def node_range(self, c: int) -> tuple[int, int]:
        """Canonical positions ``[c*N//NCN, (c+1)*N//NCN)`` owned by node ``c``."""
        return c * self.num_samples // self.num_nodes, (c + 1) * self.num_samples // self.num_nodes


def check_shuffle_args(shard_sizes: NDArray[np.integer] | list[int], num_canonical_nodes: int, seed: int,
                       epoch: int) -> NDArray[np.int64]:
    """Validate the common shuffle arguments; return the sizes as int64."""
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError('Shard sizes must be a 1-D sequence of non-negative integers.')
    if int(num_canonical_nodes) < 1:
        raise ValueError(f'num_canonical_nodes must be a positive integer, got {num_canonical_nodes}.')
    if seed < 0:
        raise ValueError(f'The shuffle seed must be non-negative, got {seed}.')
    if epoch < 0:
        raise ValueError(f'The epoch must be non-negative, got {epoch}.')
    return sizes


def unit_spans(shard_sizes: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(begins, sizes)`` of the units in their given order (begins are the exclusive prefix sums)."""
    sizes = np.asarray(shard_sizes, dtype=np.int64)
    return (np.cumsum(sizes) - sizes).astype(np.int64), sizes


def run_order(num_units: int, seed: int) -> NDArray[np.int64]:
    """The run-constant unit order: ``default_rng(seed).shuffle`` of the unit list (same draws as on a list)."""
    order = np.arange(num_units, dtype=np.int64)
    np.random.default_rng(seed).shuffle(order)
    return order


def divide_spans(begins: NDArray[np.int64], sizes: NDArray[np.int64], num_samples: int,
                 num_parts: int) -> Spans:
    """Split ordered spans at the part boundaries ``N*(p+1)//num_parts`` (runtime.md 4.2), vectorised.

    The pieces are exactly the segments between consecutive points of the union of span ends and part
    boundaries, which is what the reference's walk produces: a span crossing a boundary gives its first part to
    the earlier node and its remainder, possibly split again, to the next.
    """
    ends = np.cumsum(sizes)
    starts = ends - sizes
    cuts = np.arange(1, num_parts, dtype=np.int64) * num_samples // num_parts
    cuts = cuts[(cuts > 0) & (cuts < num_samples)]
    nonempty = sizes > 0
    points = np.union1d(starts[nonempty], cuts)
    if len(points) and num_samples:
        span_of = np.searchsorted(ends, points, side='right')
        piece_end = np.append(points[1:], num_samples)
        piece_begin = begins[span_of] + (points - starts[span_of])
        piece_size = piece_end - points
        part_of = np.searchsorted(np.arange(1, num_parts + 1, dtype=np.int64) * num_samples // num_parts, points,
                                  side='right')
    else:
        piece_begin = piece_size = part_of = np.zeros(0, np.int64)
    bounds = np.searchsorted(part_of, np.arange(num_parts + 1), side='left').astype(np.int64)
    return Spans(piece_begin.astype(np.int64), piece_size.astype(np.int64), bounds, num_samples)


def py1_spans(shard_sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int,
              epoch_rng: np.random.Generator | None) -> Spans:
    """The py1 prefix: run-shuffled units divided over canonical nodes, each node's list shuffled by ``epoch_rng``.

    With ``epoch_rng=None`` the per-node lists keep the run order (py1n shuffles them with its own node rngs).
    """
    begins, sizes = unit_spans(shard_sizes)
    order = run_order(len(sizes), seed)
    spans = divide_spans(begins[order], sizes[order], int(sizes.sum()), num_canonical_nodes)
    if epoch_rng is not None:
        for c in range(num_canonical_nodes):
            lo, hi = int(spans.bounds[c]), int(spans.bounds[c + 1])
            perm = np.arange(hi - lo)
            epoch_rng.shuffle(perm)
            spans.begins[lo:hi] = spans.begins[lo:hi][perm]
            spans.sizes[lo:hi] = spans.sizes[lo:hi][perm]
    return spans
