"""One worker's epoch, position by position, built in chunks as the loop and the prefetcher reach them.

An :class:`~streaming_core.reading.iteration.EpochIterator` needs, per position of the worker's share, the shard and
the row to read (Python lists, for the loop), and the *runs*: for each shard, the stretches of its uses with no gap
longer than the keep window (see :func:`shard_runs`), numbered in order of their first position. Building all of
that for the whole share before the first sample made a worker's start grow with its share (about 170 ms for 400,000
samples). :class:`EpochPositions` builds it chunk by chunk, in order: the first chunk is small (the first sample waits
only for it), the next ones grow to :data:`CHUNK` positions. Runs are stitched across chunk boundaries, so the runs
(and so the opening, pinning and release of shards) are exactly those of the whole share; a run's end recorded so
far is final only once the chunks reach past it by the gap (without a gap: once every chunk is built), which
:meth:`EpochPositions.ends_final_before` tells.

Nothing here locks: the iterator calls it under its own condition's lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from streaming_core.reading.catalogue import ShardCatalogue

__all__ = ['EpochPositions', 'Chunk', 'shard_runs', 'chunk_bounds', 'FIRST_CHUNK', 'CHUNK', 'STRETCH_MIN']

#: Positions in the first chunk (what the first sample waits for); each next chunk doubles, up to :data:`CHUNK`.
FIRST_CHUNK = 4096

#: The largest chunk of positions built at once.
CHUNK = 65536

#: Average samples per same-shard stretch from which the loop reads stretch by stretch.
STRETCH_MIN = 32


def shard_runs(shards: NDArray[np.int64], gap: int | None) -> tuple[NDArray[np.int64], NDArray[np.int64],
                                                                    NDArray[np.int64]]:
    """Cut each shard's uses into runs with no gap above ``gap`` positions (None: one run per shard).

    Returns ``(shard, start, end)`` per run, sorted by start; ``end`` is the run's last position.
    """
    if len(shards) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    order = np.argsort(shards, kind='stable')
    sorted_shards = shards[order]
    positions = order.astype(np.int64)
    new_shard = np.empty(len(order), dtype=bool)
    new_shard[0] = True
    new_shard[1:] = sorted_shards[1:] != sorted_shards[:-1]
    if gap is None:
        starts_mask = new_shard
    else:
        gaps = np.empty(len(order), dtype=np.int64)
        gaps[0] = 0
        gaps[1:] = positions[1:] - positions[:-1]
        starts_mask = new_shard | (gaps > gap)
    start_idx = np.flatnonzero(starts_mask)
    end_idx = np.append(start_idx[1:] - 1, len(order) - 1)
    run_shards = sorted_shards[start_idx]
    run_starts = positions[start_idx]
    run_ends = positions[end_idx]
    by_start = np.argsort(run_starts, kind='stable')
    return run_shards[by_start], run_starts[by_start], run_ends[by_start]


def chunk_bounds(count: int, first: int = FIRST_CHUNK, largest: int = CHUNK) -> list[int]:
    """The chunks' boundaries over ``count`` positions: ``[0, first, first + 2 * first, ..., count]``, each chunk
    twice the previous one up to ``largest``."""
    bounds, size = [0], max(int(first), 1)
    while bounds[-1] < count:
        bounds.append(min(bounds[-1] + size, count))
        size = min(size * 2, max(int(largest), 1))
    return bounds


class Chunk(NamedTuple):
    """The loop's tables for the positions ``[lo, hi)``."""

    lo: int
    hi: int
    shards: list[int]                              # shard per position
    rows: list[int]                                # the row in its shard (the sample id on the ``read=`` path)
    stretches: list[tuple[int, int]] | None        # ``(first, end)`` positions of same-shard pieces, or None
    runs: NDArray[np.int64]                        # the run each position belongs to


class EpochPositions:
    """A worker's positions, shards, rows and shard runs for one epoch, built chunk by chunk in order.

    Args:
        catalogue: Locates sample ids (``locate_many``) and knows the number of shards.
        sample_ids: The worker's sample ids, in order.
        gap: The keep window: a shard's uses further apart than this are separate runs (None: one run per shard).
        ids_as_rows: Give the loop the sample ids instead of the rows (the ``read=`` path).
        piece: The length of the pieces a long same-shard stretch is cut into.
        first, largest: The first and the largest chunk (see :func:`chunk_bounds`; None: :data:`FIRST_CHUNK`,
            :data:`CHUNK`, read at construction).
    """

    def __init__(self, catalogue: 'ShardCatalogue', sample_ids: NDArray[np.int64], gap: int | None,
                 ids_as_rows: bool, piece: int, first: int | None = None, largest: int | None = None) -> None:
        self._catalogue = catalogue
        self._ids = sample_ids
        self.count = len(sample_ids)
        self.gap = gap
        self._ids_as_rows = ids_as_rows
        self._piece = max(int(piece), 1)
        self.bounds = chunk_bounds(self.count, FIRST_CHUNK if first is None else first,
                                   CHUNK if largest is None else largest)
        self._chunks: list[Chunk | None] = []
        self.converted = 0  # positions located and converted so far (the frontier)
        self._last_run: NDArray[np.int64] | None = None  # per shard: 1 + its latest run, 0 for none yet
        self.num_runs = 0
        self._run_shard = np.zeros(0, dtype=np.int64)
        self._run_start = np.zeros(0, dtype=np.int64)
        self._run_end = np.zeros(0, dtype=np.int64)

    @property
    def num_chunks(self) -> int:
        """How many chunks the share is cut into."""
        return len(self.bounds) - 1

    @property
    def num_built(self) -> int:
        """How many chunks are built (in order: chunks ``[0, num_built)``)."""
        return len(self._chunks)

    @property
    def complete(self) -> bool:
        """Whether every chunk is built (every run and every run's end is known)."""
        return len(self._chunks) == self.num_chunks

    def chunk(self, c: int) -> Chunk:
        """Chunk ``c``'s tables (building the chunks up to it first)."""
        while len(self._chunks) <= c:
            self.build_next()
        chunk = self._chunks[c]
        if chunk is None:
            raise RuntimeError(f'Chunk {c} of this epoch was already dropped; chunks are read in order.')
        return chunk

    def drop(self, c: int) -> None:
        """Forget chunk ``c``'s per-position tables (the loop is past it; the runs stay)."""
        if c < len(self._chunks):
            self._chunks[c] = None

    def run(self, k: int) -> tuple[int, int, int]:
        """Run ``k`` (in order of start) as ``(shard, start, end so far)``; it must exist (``k < num_runs``)."""
        return int(self._run_shard[k]), int(self._run_start[k]), int(self._run_end[k])

    def run_end(self, k: int) -> int:
        """Run ``k``'s last position known so far."""
        return int(self._run_end[k])

    def ends_final_before(self, pos: int) -> bool:
        """Whether every recorded run end below ``pos`` is final (no later chunk can extend such a run)."""
        if self.complete:
            return True
        return self.gap is not None and self.converted >= pos + self.gap

    def build_to(self, pos: int) -> None:
        """Build chunks until position ``pos`` (capped at the share's end) is converted."""
        while self.converted < min(pos, self.count) and not self.complete:
            self.build_next()

    # ----------------------------------------------------------------------------------------------------------
    def build_next(self) -> None:
        """Build the next chunk (the runs it continues get their new ends, its new runs the next numbers); nothing
        once every chunk is built."""
        c = len(self._chunks)
        if c == self.num_chunks:
            return
        lo, hi = self.bounds[c], self.bounds[c + 1]
        ids = self._ids[lo:hi]
        shards, rows = self._catalogue.locate_many(ids)
        shards = np.asarray(shards, dtype=np.int64)
        n = hi - lo
        if self._last_run is None:
            # Zeros (not a fill): the pages of shards this share never uses are never touched.
            self._last_run = np.zeros(self._catalogue.num_shards, dtype=np.int64)
        # Runs within the chunk, in shard order (as shard_runs), with each position's run.
        order = np.argsort(shards, kind='stable')
        sorted_shards = shards[order]
        new_shard = np.empty(n, dtype=bool)
        new_shard[0] = True
        new_shard[1:] = sorted_shards[1:] != sorted_shards[:-1]
        starts_mask = new_shard
        if self.gap is not None:
            starts_mask = new_shard.copy()
            starts_mask[1:] |= (order[1:] - order[:-1]) > self.gap
        start_idx = np.flatnonzero(starts_mask)
        end_idx = np.append(start_idx[1:] - 1, n - 1)
        r_shard = sorted_shards[start_idx]
        r_start = order[start_idx] + lo
        r_end = order[end_idx] + lo
        # A shard's first run here continues its latest earlier run when that one ended within the gap.
        prev = self._last_run[r_shard] - 1
        merge = new_shard[start_idx] & (prev >= 0)
        if self.gap is not None and self.num_runs:
            merge &= (r_start - self._run_end[np.maximum(prev, 0)]) <= self.gap
        gid = np.empty(len(r_shard), dtype=np.int64)
        gid[merge] = prev[merge]
        kept = np.flatnonzero(~merge)
        kept = kept[np.argsort(r_start[kept], kind='stable')]  # new runs, numbered in order of start
        gid[kept] = self.num_runs + np.arange(len(kept), dtype=np.int64)
        extended = prev[merge]
        self._append_runs(r_shard[kept], r_start[kept], r_end[kept])
        self._run_end[extended] = r_end[merge]
        last = np.append(new_shard[start_idx][1:], True)  # each shard's last run here
        self._last_run[r_shard[last]] = gid[last] + 1
        runs = np.empty(n, dtype=np.int64)
        runs[order] = np.repeat(gid, end_idx - start_idx + 1)
        stretches = None
        cuts = np.flatnonzero(shards[1:] != shards[:-1]) + 1  # long same-shard stretches: read by the view's loop
        if not self._ids_as_rows and n >= STRETCH_MIN * (len(cuts) + 1):  # the read= path reads one by one
            edges = [lo, *(cuts + lo).tolist(), hi]
            stretches = [(first, min(first + self._piece, end))
                         for start, end in zip(edges[:-1], edges[1:])
                         for first in range(start, end, self._piece)]
        self._chunks.append(Chunk(lo, hi, shards.tolist(), ids.tolist() if self._ids_as_rows else rows.tolist(),
                                  stretches, runs))
        self.converted = hi

    def _append_runs(self, shard: NDArray[np.int64], start: NDArray[np.int64], end: NDArray[np.int64]) -> None:
        need = self.num_runs + len(shard)
        if need > len(self._run_shard):
            capacity = max(need, 2 * len(self._run_shard), 1024)
            for name in ('_run_shard', '_run_start', '_run_end'):
                old = getattr(self, name)
                grown = np.empty(capacity, dtype=np.int64)
                grown[:self.num_runs] = old[:self.num_runs]
                setattr(self, name, grown)
        self._run_shard[self.num_runs:need] = shard
        self._run_start[self.num_runs:need] = start
        self._run_end[self.num_runs:need] = end
        self.num_runs = need
