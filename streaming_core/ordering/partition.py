"""Partitioning: the epoch's canonical sample order cut into (node, rank, worker, batch, slot) (runtime.md 3).

:func:`get_partitions` is bit-exact with the reference's ``orig`` and ``relaxed`` algorithms. It returns *big*
IDs, i.e. positions in the canonical stream; the shuffle then maps positions to samples.

The canonical stream ``S`` interleaves ``NCN`` canonical rows (row ``c`` covers ``[c*N//NCN, (c+1)*N//NCN)``, a
short row repeats its last ID, and when ``NCN < PN`` each row is padded with repeats from near its end);
``S[t*NCN + c] = row_c[t]``. After dropping ``drop_first`` IDs, physical node ``p`` reads ``S'[p::PN]``, rank ``r``
reads every ``R``-th of those, and workers take device batches round-robin. :func:`node_positions` computes one
node's list from that closed form without building the others (used by ``EpochPlanner.plan_node``).
"""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
from numpy.typing import NDArray

__all__ = ['get_partitions', 'get_partitions_orig', 'get_partitions_relaxed', 'canonical_rows',
           'canonical_stream', 'node_positions', 'rank_pad', 'to_workers', 'node_layout', 'NodeLayout',
           'traversal_order', 'resolve_partition_algo', 'num_batches', 'check_drop_first', 'PARTITION_ALGOS']

logger = logging.getLogger('streaming_core')

PARTITION_ALGOS = ('orig', 'relaxed')


def _check_shape_args(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, ranks_per_node: int,
                      workers_per_rank: int, batch_size: int | None, drop_first: int) -> None:
    for name, value in (('num_canonical_nodes', num_canonical_nodes), ('num_physical_nodes', num_physical_nodes),
                        ('ranks_per_node', ranks_per_node), ('workers_per_rank', workers_per_rank)):
        if int(value) < 1:
            raise ValueError(f'`{name}` must be a positive integer, got {value}.')
    if batch_size is not None and int(batch_size) < 1:
        raise ValueError(f'`batch_size` must be a positive integer, got {batch_size}.')
    if num_samples < 0:
        raise ValueError(f'The number of samples must be non-negative, got {num_samples}.')
    if drop_first < 0:
        raise ValueError(f'`drop_first` (samples already seen this epoch) must be non-negative, got {drop_first}.')


def _check_divisible(num_canonical_nodes: int, num_physical_nodes: int) -> None:
    big, small = max(num_canonical_nodes, num_physical_nodes), min(num_canonical_nodes, num_physical_nodes)
    if big % small:
        raise ValueError(f'Either canonical or physical nodes must be evenly divisible by the other, otherwise '
                         f'striping slices of shards over nodes may lead to each node downloading all shards '
                         f'(num_canonical_nodes={num_canonical_nodes}, num_physical_nodes={num_physical_nodes}). '
                         f'Choose num_canonical_nodes as a multiple or divisor of the node count, or use '
                         f"partition_algo='relaxed' when resuming on a different node count.")


def _row_geometry(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int) -> tuple[int, int, int, int]:
    """``(samples per canonical node, node ratio, padding, padded row length)``."""
    spcn = -(-num_samples // num_canonical_nodes)
    ratio = pad = 0
    if num_canonical_nodes < num_physical_nodes:
        ratio = num_physical_nodes // num_canonical_nodes
        overflow = spcn % ratio
        if overflow:
            pad = ratio - overflow
    return spcn, ratio, pad, spcn + pad


def _is_regular(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int) -> bool:
    return num_samples > num_canonical_nodes or (num_samples == num_canonical_nodes
                                                 and num_canonical_nodes >= num_physical_nodes)


def canonical_rows(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int) -> NDArray[np.int64]:
    """The ``(NCN, L)`` matrix of canonical rows (big IDs), with short-row repeats and ratio padding."""
    spcn, ratio, pad, length = _row_geometry(num_samples, num_canonical_nodes, num_physical_nodes)
    starts = (np.arange(num_canonical_nodes, dtype=np.int64) * num_samples // num_canonical_nodes)[:, None]
    if _is_regular(num_samples, num_canonical_nodes, num_physical_nodes):
        ids = starts + np.arange(length, dtype=np.int64)[None, :]
        stops = (np.arange(1, num_canonical_nodes + 1, dtype=np.int64) * num_samples // num_canonical_nodes)[:, None]
        ids[:, spcn - 1:spcn] -= (stops - starts < spcn)
    else:
        warnings.warn(f'Trying to partition {num_samples} samples over {num_canonical_nodes} canonical nodes: '
                      f'with fewer samples than canonical nodes, samples are repeated to fill every node. Lower '
                      f'num_canonical_nodes or add samples.', UserWarning, stacklevel=3)
        ids = (np.arange(num_canonical_nodes * length, dtype=np.int64) % max(num_samples, 1)).reshape(
            num_canonical_nodes, length)
    if pad:
        try:
            ids[:, -pad:] = ids[:, -pad - ratio + 1 - pad:-pad - ratio + 1]
        except ValueError:
            raise ValueError(f'Cannot pad canonical rows of {spcn} samples for {ratio} physical nodes per canonical '
                             f'node ({num_samples} samples, num_canonical_nodes={num_canonical_nodes}): each '
                             f'canonical node needs more samples. Raise '
                             f'num_canonical_nodes to a multiple of the node count.') from None
    return ids


def canonical_stream(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int,
                     drop_first: int = 0) -> NDArray[np.int64]:
    """``S' = rows.T.flatten()[drop_first:]`` (``drop_first`` already rounded down to a multiple of PN)."""
    return canonical_rows(num_samples, num_canonical_nodes, num_physical_nodes).T.reshape(-1)[drop_first:]


def rank_pad(node_lists: NDArray[np.int64], ranks_per_node: int) -> NDArray[np.int64]:
    """Pad each node's list (axis 1) to a multiple of ``R`` by repeating samples near its end (runtime.md 3.1.6)."""
    length = node_lists.shape[1]
    overflow = length % ranks_per_node
    if not overflow:
        return node_lists
    underflow = ranks_per_node - overflow
    if ranks_per_node + underflow - 1 > length:
        warnings.warn(f'Attempting to partition {length} samples per node over {ranks_per_node} ranks: with too few '
                      f'samples, some ranks repeat samples. Lower num_canonical_nodes or the device count.',
                      UserWarning, stacklevel=3)
        extra = node_lists[:, np.arange(underflow) % length]
    else:
        extra = node_lists[:, length - ranks_per_node - underflow + 1:length - ranks_per_node + 1]
    return np.concatenate([node_lists, extra], 1)


def to_workers(node_lists: NDArray[np.int64], ranks_per_node: int, workers_per_rank: int,
               batch_size: int) -> NDArray[np.int64]:
    """``(PN, M)`` rank-padded node lists -> ``(PN, R, Wk, batches, B)`` with ``-1`` worker padding at the tail."""
    num_nodes = node_lists.shape[0]
    ids = node_lists.reshape(num_nodes, -1, ranks_per_node)
    per_rank = ids.shape[1]
    group = workers_per_rank * batch_size
    overflow = -(-per_rank // group) * group - per_rank
    if overflow:
        ids = np.concatenate([ids, np.full((num_nodes, overflow, ranks_per_node), -1, np.int64)], 1)
    ids = ids.transpose(0, 2, 1).reshape(num_nodes, ranks_per_node, -1, workers_per_rank, batch_size)
    return np.ascontiguousarray(ids.transpose(0, 1, 3, 2, 4))


def _round_drop(drop_first: int, num_physical_nodes: int) -> int:
    if drop_first % num_physical_nodes:
        logger.warning('`drop_first` was not divisible by `num_physical_nodes`. Rounding it down to make it '
                       'divisible.')
        drop_first -= drop_first % num_physical_nodes
    return drop_first


def get_partitions_orig(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, ranks_per_node: int,
                        workers_per_rank: int, batch_size: int | None = None,
                        drop_first: int = 0) -> NDArray[np.int64]:
    """The reference's ``orig`` partition (runtime.md 3.1): ``(PN, R, Wk, batches, B)`` big IDs, ``-1`` padding.

    Raises:
        ValueError: NCN and PN do not divide one another, or a bad shape argument.
    """
    _check_shape_args(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node, workers_per_rank,
                      batch_size, drop_first)
    _check_divisible(num_canonical_nodes, num_physical_nodes)
    batch_size = batch_size or 1
    drop_first = _round_drop(drop_first, num_physical_nodes)
    stream = canonical_stream(num_samples, num_canonical_nodes, num_physical_nodes, drop_first)
    node_lists = stream.reshape(-1, num_physical_nodes).T
    return to_workers(rank_pad(node_lists, ranks_per_node), ranks_per_node, workers_per_rank, batch_size)


def traversal_order(partition: NDArray[np.int64]) -> NDArray[np.int64]:
    """The order the training loop sees: ``partition.transpose(3, 2, 0, 1, 4).flatten()``."""
    return partition.transpose(3, 2, 0, 1, 4).reshape(-1)


def resolve_partition_algo(algo: str, num_canonical_nodes: int, num_physical_nodes: int,
                           initial_physical_nodes: int | None) -> str:
    """``'orig'`` when ``relaxed`` would fall back to it (fresh run, or PN and NCN divide one another)."""
    if algo not in PARTITION_ALGOS:
        raise ValueError(f'Unknown partition_algo {algo!r}; expected one of {", ".join(PARTITION_ALGOS)}.')
    if algo == 'orig' or initial_physical_nodes is None:
        return 'orig'
    big, small = max(num_canonical_nodes, num_physical_nodes), min(num_canonical_nodes, num_physical_nodes)
    return 'orig' if big % small == 0 else 'relaxed'


def get_partitions_relaxed(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int,
                           ranks_per_node: int, workers_per_rank: int, batch_size: int = 1, drop_first: int = 0,
                           initial_physical_nodes: int | None = None) -> NDArray[np.int64]:
    """The reference's ``relaxed`` partition (runtime.md 3.3).

    On a fresh run, or when PN and NCN divide one another, this is ``orig``. Otherwise the initial layout's
    (``initial_physical_nodes``) global batches are replayed, each cut into contiguous ``B``-sized device pieces.

    Raises:
        ValueError: The global batch size is not divisible by ``initial_physical_nodes * ranks_per_node``.
    """
    if resolve_partition_algo('relaxed', num_canonical_nodes, num_physical_nodes, initial_physical_nodes) == 'orig':
        return get_partitions_orig(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node,
                                   workers_per_rank, batch_size, drop_first)
    assert initial_physical_nodes is not None
    batch_size = batch_size or 1
    global_batch_size = num_physical_nodes * ranks_per_node * batch_size
    initial_devices = initial_physical_nodes * ranks_per_node
    if global_batch_size % initial_devices:
        raise ValueError(f'A global batch size of {global_batch_size} is not evenly divisible by the initial total '
                         f'number of devices of {initial_devices}. Make sure that when using the `relaxed` '
                         f'partitioning algorithm, the global batch size does not change, and is divisible by the '
                         f'initial and current total number of devices.')
    initial_batch_size = global_batch_size // initial_devices
    partition = get_partitions_orig(num_samples, num_canonical_nodes, initial_physical_nodes, ranks_per_node,
                                    workers_per_rank, initial_batch_size, drop_first)
    flat = traversal_order(partition)
    out = flat.reshape(-1, workers_per_rank, num_physical_nodes, ranks_per_node, batch_size)
    return np.ascontiguousarray(out.transpose(2, 3, 1, 0, 4))


def check_drop_first(num_samples: int, num_physical_nodes: int, ranks_per_node: int, drop_first: int) -> None:
    """The reference wrapper's check: refuse ``drop_first > N + (W - N % W)`` with ``W = PN * R``."""
    world = num_physical_nodes * ranks_per_node
    if world > 0 and num_samples + (world - num_samples % world) < drop_first:
        raise ValueError(f'Resuming further into the dataset ({drop_first}) than it has samples ({num_samples}). '
                         f'The checkpoint does not belong to this dataset or epoch size.')


def get_partitions(algo: str, num_samples: int, num_canonical_nodes: int, num_physical_nodes: int,
                   ranks_per_node: int, workers_per_rank: int, batch_size: int = 1, drop_first: int = 0,
                   initial_physical_nodes: int | None = None) -> NDArray[np.int64]:
    """Partition ``num_samples`` canonical positions over the world (runtime.md section 3).

    Args:
        algo: ``'orig'`` or ``'relaxed'``.
        num_samples: The epoch size ``N``.
        num_canonical_nodes: NCN, which fixes the canonical stream (and hence the global batches).
        num_physical_nodes: PN of the parallel world.
        ranks_per_node: R.
        workers_per_rank: Wk, the DataLoader's worker count (1 without workers).
        batch_size: B, per device.
        drop_first: Samples of the canonical stream already seen (mid-epoch resumption).
        initial_physical_nodes: PN of the run's first epoch (``relaxed`` resumption on another node count).

    Returns:
        int64 ``(PN, R, Wk, batches_per_worker, B)`` of big IDs, ``-1`` for padding.

    Raises:
        ValueError: Resuming beyond the epoch, an unknown algorithm, or an invalid shape.
    """
    check_drop_first(num_samples, num_physical_nodes, ranks_per_node, drop_first)
    if algo == 'orig':
        return get_partitions_orig(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node,
                                   workers_per_rank, batch_size, drop_first)
    if algo == 'relaxed':
        return get_partitions_relaxed(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node,
                                      workers_per_rank, batch_size, drop_first, initial_physical_nodes)
    raise ValueError(f'Unknown partition_algo {algo!r}; expected one of {", ".join(PARTITION_ALGOS)}.')


class NodeLayout:
    """One physical node's share of an ``orig`` partition, computed from the closed form (O(its samples)).

    ``positions(lo, hi)`` gives entries ``[lo, hi)`` of the node's rank-padded list (big IDs) together with the
    canonical row each came from. ``length`` is that list's length (a multiple of R).
    """

    def __init__(self, num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, ranks_per_node: int,
                 drop_first: int, node: int) -> None:
        _check_divisible(num_canonical_nodes, num_physical_nodes)
        if not 0 <= node < num_physical_nodes:
            raise ValueError(f'node {node} is out of range for {num_physical_nodes} physical nodes.')
        self.num_samples = num_samples
        self.ncn = num_canonical_nodes
        self.pn = num_physical_nodes
        self.ranks = ranks_per_node
        self.node = node
        self.drop = _round_drop(drop_first, num_physical_nodes)
        self.spcn, self.ratio, self.pad, self.row_length = _row_geometry(num_samples, num_canonical_nodes,
                                                                        num_physical_nodes)
        self.regular = _is_regular(num_samples, num_canonical_nodes, num_physical_nodes)
        self.raw_length = (num_canonical_nodes * self.row_length - self.drop) // num_physical_nodes
        overflow = self.raw_length % ranks_per_node
        self.underflow = ranks_per_node - overflow if overflow else 0
        self.length = self.raw_length + self.underflow

    @property
    def fast(self) -> bool:
        """Whether the closed form applies (regular rows, and padding sources inside the row)."""
        if not self.regular:
            return False
        if self.pad and self.row_length - 2 * self.pad - self.ratio + 1 < 0:
            return False
        if self.underflow and self.ranks + self.underflow - 1 > self.raw_length:
            return False
        return True

    def canonical_nodes(self) -> list[int]:
        """The canonical rows this node reads from (``c = (drop + node + k*PN) % NCN``)."""
        if self.raw_length == 0:
            return []
        if self.ncn >= self.pn:
            return list(range((self.drop + self.node) % self.pn, self.ncn, self.pn))
        return [(self.drop + self.node) % self.ncn]

    def _raw(self, k: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        g = k * self.pn
        g += self.drop + self.node
        if self.ncn == 1:
            col, row = g, np.zeros_like(g)
        else:
            col, row = np.divmod(g, self.ncn)
        if self.pad:
            col = np.where(col >= self.spcn, col - self.pad - self.ratio + 1, col)
        if self.ncn == 1:
            start = 0
        else:
            start = row * self.num_samples
            start //= self.ncn
        if self.num_samples % self.ncn:  # some rows are short: their last slot repeats their last ID
            stop = (row + 1) * self.num_samples // self.ncn
            col = col - ((col == self.spcn - 1) & (stop - start < self.spcn))
        return col + start, row

    def positions(self, lo: int, hi: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Entries ``[lo, hi)`` of the rank-padded node list: ``(big IDs, canonical row of each)``."""
        k = np.arange(lo, hi, dtype=np.int64)
        if self.underflow:
            tail = k >= self.raw_length
            k = np.where(tail, k - self.ranks - self.underflow + 1, k)
        return self._raw(k)


def node_layout(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, ranks_per_node: int,
                drop_first: int, node: int) -> NodeLayout:
    """The :class:`NodeLayout` of ``node`` (validates like ``orig``)."""
    return NodeLayout(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node, drop_first, node)


def node_positions(num_samples: int, num_canonical_nodes: int, num_physical_nodes: int, ranks_per_node: int,
                   drop_first: int, node: int) -> NDArray[np.int64]:
    """Node ``node``'s rank-padded list of big IDs (equals the ``orig`` slice's rank lists interleaved)."""
    layout = node_layout(num_samples, num_canonical_nodes, num_physical_nodes, ranks_per_node, drop_first, node)
    if not layout.fast:
        stream = canonical_stream(num_samples, num_canonical_nodes, num_physical_nodes, layout.drop)
        lists = rank_pad(stream.reshape(-1, num_physical_nodes).T, ranks_per_node)
        return np.ascontiguousarray(lists[node])
    return layout.positions(0, layout.length)[0]


def num_batches(length: int, ranks_per_node: int, workers_per_rank: int, batch_size: int) -> int:
    """Batches per worker for a rank-padded node list of ``length``."""
    per_rank = length // ranks_per_node
    return math.ceil(per_rank / (workers_per_rank * batch_size)) if per_rank else 0
