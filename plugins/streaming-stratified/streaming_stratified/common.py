"""Building blocks shared by the stream-aware batching methods (runtime.md 5.2-5.4)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from streaming_core.plugin_api import get_partitions

if TYPE_CHECKING:
    from streaming_core.plugin_api import EpochPlanner, World

__all__ = ['stream_partition', 'leading_full_rows', 'finish_global_batches', 'place_by_origin', 'origin_rng']


def stream_partition(planner: 'EpochPlanner', epoch: int, stream_id: int, num_physical_nodes: int,
                     ranks_per_node: int, workers_per_rank: int, batch_size: int) -> NDArray[np.int64]:
    """One stream resampled alone, partitioned over the given shape (no drop), shuffled with the stream's block
    size (:meth:`EpochPlanner.stream_block_size`) and mapped to small IDs: ``(PN, R, Wk, batches, B)``.
    """
    res = planner.resampled(epoch, stream_id)
    ids = get_partitions(planner.partition_algo, res.size, planner.num_canonical_nodes, num_physical_nodes,
                         ranks_per_node, workers_per_rank, batch_size, 0, planner.initial_physical_nodes)
    if planner.shuffle:
        perm = planner.shuffle_units(res.units, epoch, planner.stream_block_size(stream_id))
        pad = ids < 0
        ids = perm[ids]
        ids[pad] = -1
    return res.to_small(ids, out=ids)


def leading_full_rows(rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """The leading rows that hold no ``-1`` (padding only ever sits in trailing rows)."""
    if not len(rows):
        return rows
    has_pad = (rows == -1).any(1)
    count = int(np.argmax(has_pad)) if has_pad.any() else len(rows)
    return rows[:count]


def origin_rng(planner: 'EpochPlanner', epoch: int) -> np.random.Generator:
    """``default_rng(seed + epoch)`` when choices vary per epoch (shuffle + balanced), else ``default_rng(seed)``."""
    return np.random.default_rng(planner.shuffle_seed + epoch if planner.epoch_seed_change else planner.shuffle_seed)


def place_by_origin(batches: list[NDArray[np.int64]], rng: np.random.Generator, rows: int | None = None,
                    ) -> NDArray[np.int64]:
    """Interleave per-stream batch lists: shuffle the stream labels ``[0]*n0 + [1]*n1 + ...`` with ``rng``, then put
    each stream's batches, in their own order, at its labels' positions. ``rows`` pads with ``-1`` batches.
    """
    width = batches[0].shape[1]
    labels = np.concatenate([np.full(len(b), i, np.int64) for i, b in enumerate(batches)])
    rng.shuffle(labels)
    out = np.full((len(labels) if rows is None else rows, width), -1, np.int64)
    head = out[:len(labels)]
    for i, b in enumerate(batches):
        head[labels == i] = b
    return out


def finish_global_batches(batches: NDArray[np.int64], world: 'World', batch_size: int, sample_in_epoch: int,
                          method: str) -> NDArray[np.int64]:
    """Drop the global batches already seen, pad with whole ``-1`` global batches to a multiple of the worker
    count, and lay out as ``(PN, R, Wk, batches, B)`` (global batch ``q`` -> worker ``q % Wk``).
    """
    pn, ranks, workers = world.num_nodes, world.ranks_per_node, world.workers_per_rank
    global_batch = pn * ranks * batch_size
    batches = batches.reshape(-1, global_batch)
    if sample_in_epoch % global_batch:
        warnings.warn(f'Because of the `{method}` batching method, resumption may only occur on a sample that is a '
                      f'multiple of the current global batch size of {global_batch}. Resuming training after the most '
                      f'recently finished global batch (sample {sample_in_epoch} was requested).', UserWarning,
                      stacklevel=3)
    batches = batches[sample_in_epoch // global_batch:]
    missing = -len(batches) % workers
    if missing:
        batches = np.concatenate([batches, np.full((missing, global_batch), -1, np.int64)])
    out = batches.reshape(-1, workers, pn, ranks, batch_size).transpose(2, 3, 1, 0, 4)
    return np.ascontiguousarray(out)
