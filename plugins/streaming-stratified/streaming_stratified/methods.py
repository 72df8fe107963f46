"""The stream-aware batching methods, bit-exact with mosaicml-streaming 0.13 (runtime.md 5.2-5.4).

Each is ``method(planner, world, epoch, sample_in_epoch) -> (PN, R, Wk, batches, B)`` small IDs, ``-1`` padding.

* ``stratified``: every global batch holds the same number of samples from each stream (``int(p_i * GBS)``, the
  remainder going to the largest fractional parts). Within a global batch, streams fill consecutive column
  blocks, so one *device* batch is mostly one stream; the composition holds per global batch.
* ``per_stream``: every global batch comes from a single stream; the order of streams is shuffled.
* ``device_per_stream``: every *device* batch comes from a single stream.

Resuming drops whole global batches (``sample_in_epoch // GBS``, with a warning when not aligned). ``per_stream``
and ``device_per_stream`` cut each stream per rank, so they declare ``elastic = False``: a state saved on another
number of nodes or ranks is refused. Where the
reference computes a per-stream shuffle block of ``int(shuffle_block_size * proportion)``, which can reach 0 for a
small stream and crash, it is clamped to at least 1 (:meth:`EpochPlanner.stream_block_size`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from streaming_core.plugin_api import traversal_order
from streaming_stratified.common import (
    finish_global_batches,
    leading_full_rows,
    origin_rng,
    place_by_origin,
    stream_partition,
)

if TYPE_CHECKING:
    from streaming_core.plugin_api import EpochPlanner, World

__all__ = ['stratified', 'per_stream', 'device_per_stream', 'batch_parts']


def batch_parts(proportions: NDArray[np.float64], global_batch: int) -> NDArray[np.int64]:
    """Samples per stream in one global batch: ``int(p_i * GBS)``, then +1 by descending fractional remainder.

    Raises:
        ValueError: A stream would get 0 samples per global batch.
    """
    raw = np.asarray(proportions, np.float64) * global_batch
    parts = raw.astype(np.int64)
    remainders = raw - parts
    missing = global_batch - int(parts.sum())
    if missing > 0:
        order = np.argsort(remainders)[::-1]
        for k in range(missing):
            parts[order[k % len(order)]] += 1
    for i, part in enumerate(parts.tolist()):
        if part <= 0:
            raise ValueError(f'Number of samples for stream {i} is 0 because the portion of the global batch of size '
                             f'{global_batch} for that stream is too low (proportion {float(proportions[i]):.6g}). '
                             f'Increase the global batch size or the stream\'s proportion.')
    return parts


def stratified(planner: 'EpochPlanner', world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
    """``stratified`` batching: each global batch is ``[stream 0 part | stream 1 part | ...]``.

    Raises:
        ValueError: A stream's part of a global batch is 0, or a stream cannot fill its part of even one global
            batch (the reference silently yields an empty epoch then).
    """
    global_batch = world.num_nodes * world.ranks_per_node * planner.batch_size
    parts = batch_parts(planner.proportion_per_stream, global_batch)
    columns = []
    for i, part in enumerate(parts.tolist()):
        flat = traversal_order(stream_partition(planner, epoch, i, 1, world.ranks_per_node,
                                                world.workers_per_rank, 1))
        flat = np.concatenate([flat, np.full(-len(flat) % part, -1, np.int64)])
        rows = flat.reshape(-1, part)
        rows = rows[~(rows == -1).any(1)]
        if not len(rows):
            raise ValueError(f'Stream {i} has {int(planner.choose_per_stream[i])} samples this epoch, too few to fill '
                             f'its {part} samples of even one global batch of {global_batch}. Give it more samples '
                             f'(repeat/choose) or lower the batch size.')
        columns.append(rows)
    count = min(len(c) for c in columns)
    batches = np.hstack([c[:count] for c in columns])
    return finish_global_batches(batches, world, planner.batch_size, sample_in_epoch, 'stratified')


def per_stream(planner: 'EpochPlanner', world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
    """``per_stream`` batching: whole global batches from one stream, in a shuffled stream order.

    Raises:
        ValueError: A stream cannot fill one global batch.
    """
    pn, ranks, workers, batch = world.num_nodes, world.ranks_per_node, world.workers_per_rank, planner.batch_size
    global_batch = pn * ranks * batch
    batches = []
    for i in range(planner.num_streams):
        flat = traversal_order(stream_partition(planner, epoch, i, pn, ranks, workers, batch))
        full = leading_full_rows(flat.reshape(-1, global_batch))
        if not len(full):
            raise ValueError(f'Stream with index {i} does not have an adequate number of samples to construct a '
                             f'complete global batch of size {global_batch} (it has '
                             f'{int(planner.choose_per_stream[i])} this epoch). Give it more samples or lower the '
                             f'batch size.')
        batches.append(full)
    ordered = place_by_origin(batches, origin_rng(planner, epoch))
    return finish_global_batches(ordered, world, batch, sample_in_epoch, 'per_stream')


per_stream.elastic = False  # type: ignore[attr-defined]  # each stream is cut per rank: see check_parallel_shape


def device_per_stream(planner: 'EpochPlanner', world: 'World', epoch: int,
                      sample_in_epoch: int) -> NDArray[np.int64]:
    """``device_per_stream`` batching: each device batch from one stream.

    Each stream is partitioned over NCN "nodes" with B=1; physical node ``p`` takes canonical rows
    ``[p*k, (p+1)*k)`` (``k = NCN/PN``) and cuts them into device batches. Per node the stream order is shuffled
    (one rng across nodes), nodes are padded with ``-1`` batches to a common count, and the nodes' device batches are
    interleaved (so, as in the reference, device ``d`` of the final layout draws from node list ``d % PN``).

    Raises:
        ValueError: NCN not divisible by the node count, or a stream without one full device batch on a node.
    """
    pn, ranks, workers, batch = world.num_nodes, world.ranks_per_node, world.workers_per_rank, planner.batch_size
    ncn = planner.num_canonical_nodes
    if ncn % pn:
        raise ValueError(f'device_per_stream batching needs num_canonical_nodes ({ncn}) to be divisible by the number '
                         f'of physical nodes ({pn}). Set num_canonical_nodes to a multiple of the node count.')
    per_node = ncn // pn
    devices = pn * ranks
    node_batches: list[list[NDArray[np.int64]]] = [[] for _ in range(pn)]
    for i in range(planner.num_streams):
        part = stream_partition(planner, epoch, i, ncn, ranks, workers, 1)
        for p in range(pn):
            flat = traversal_order(part[p * per_node:(p + 1) * per_node])
            flat = np.concatenate([flat, np.full(batch - flat.size % batch, -1, np.int64)])
            full = leading_full_rows(flat.reshape(-1, batch))
            if not len(full):
                raise ValueError(f'Stream {i} does not have enough samples on node {p} to build one complete device '
                                 f'batch of size {batch}. Give it more samples or lower the batch size.')
            node_batches[p].append(full)
    most = max(sum(len(b) for b in lists) for lists in node_batches)
    most += devices - most % devices
    rng = origin_rng(planner, epoch)
    nodes = [place_by_origin(lists, rng, rows=most) for lists in node_batches]
    interleaved = np.stack(nodes, axis=1).reshape(-1, batch)
    return finish_global_batches(interleaved, world, batch, sample_in_epoch, 'device_per_stream')


device_per_stream.elastic = False  # type: ignore[attr-defined]
