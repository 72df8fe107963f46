"""Per-epoch planning: which sample each node, rank, worker and batch slot reads.

:class:`EpochPlanner` holds everything the order depends on (sample counts, stream weights, order arguments)
and is cheap to pickle. Batching methods receive it and combine its building blocks: resampling the streams
(:meth:`EpochPlanner.resample`), partitioning (:func:`streaming_core.ordering.partition.get_partitions`) and shuffling
(:meth:`EpochPlanner.shuffle_units`). Everything is bit-exact with mosaicml-streaming 0.13 (runtime.md 1.4, 1.5,
3, 4, 5).

:meth:`EpochPlanner.plan_node` computes one physical node's slice. With ``random`` batching, an ``orig``-compatible
partition and a shuffle that provides ``nodes_share``/``node_share`` (py1e, py1s, py1b, py1br, py1n), it never
builds the other nodes' parts: memory is O(samples the node reads), and with ``py1n`` so is the time.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.machinery.lookup import get_registry
from streaming_core.ordering.order_config import (
    PLANNER_FIELDS,
    SPLIT_NODES_FACTOR,
    OrderConfig,
    default_num_canonical_nodes,
    default_shuffle_block_size,
    shuffle_declares,
)
from streaming_core.ordering.partition import (
    NodeLayout,
    check_drop_first,
    get_partitions,
    num_batches,
    resolve_partition_algo,
)
from streaming_core.ordering.sampling import Resampled, resample
from streaming_core.ordering.weights import apply_weights

if TYPE_CHECKING:
    from streaming_core.ordering.world import World

__all__ = ['EpochPlanner', 'random_batching', 'default_num_canonical_nodes', 'default_shuffle_block_size',
           'apply_weights', 'shuffle_declares', 'BLOCK_WARNING', 'SPLIT_NODES_FACTOR']

_CHUNK = 1 << 22
#: The warning given when a shuffle that declares ``spreads_shards_within_block`` gets a shard larger than its block.
BLOCK_WARNING = ('Shuffle block size was smaller than shard size for some shards. This will result in a more '
                 'limited shuffle, since samples from a shard are not spread beyond the shard itself. Raise '
                 'shuffle_block_size above the largest shard size for a better shuffle.')


@dataclass
class EpochPlanner:
    """The inputs of the sample order, and the building blocks batching methods use.

    Attributes:
        samples_per_shard: Sample count of every shard of every stream, in stream order.
        shards_per_stream: Number of shards per stream.
        choose_per_stream: Samples per epoch per stream (after :func:`apply_weights`).
        proportion_per_stream: Derived proportion per stream (used by stream-aware batching).
        epoch_size: ``sum(choose_per_stream)``.
        batch_size: Per-device batch size.
        num_canonical_nodes: NCN, already resolved.
        shuffle, shuffle_algo, shuffle_seed, shuffle_block_size: The shuffle (block size already resolved).
        partition_algo: ``'orig'`` or ``'relaxed'``.
        batching_method: A registered batching method name.
        sampling_method, sampling_granularity: Resampling of partial repeats (``'balanced'``/``'fixed'``).
        initial_physical_nodes: PN of the run's first epoch, for ``relaxed`` resumption (None on a fresh run).
        extra: Free-form options for third-party batching methods.

    The order arguments are checked (and normalised to Python ints) by
    :class:`~streaming_core.ordering.order_config.OrderConfig`, as ``StreamingDataset`` checks them (:attr:`order`).
    """

    samples_per_shard: NDArray[np.int64]
    shards_per_stream: NDArray[np.int64]
    choose_per_stream: NDArray[np.int64]
    proportion_per_stream: NDArray[np.float64]
    epoch_size: int
    batch_size: int | None
    num_canonical_nodes: int
    shuffle: bool = False
    shuffle_algo: str = 'py1e'
    shuffle_seed: int = 9176
    shuffle_block_size: int = 1 << 18
    partition_algo: str = 'relaxed'
    batching_method: str = 'random'
    sampling_method: str = 'balanced'
    sampling_granularity: int = 1
    initial_physical_nodes: int | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.samples_per_shard = np.asarray(self.samples_per_shard, np.int64)
        self.shards_per_stream = np.asarray(self.shards_per_stream, np.int64)
        self.choose_per_stream = np.asarray(self.choose_per_stream, np.int64)
        self.proportion_per_stream = np.asarray(self.proportion_per_stream, np.float64)
        if int(self.shards_per_stream.sum()) != len(self.samples_per_shard):
            raise ValueError(f'shards_per_stream sums to {int(self.shards_per_stream.sum())} but samples_per_shard '
                             f'has {len(self.samples_per_shard)} shards.')
        streams = len(self.shards_per_stream)
        if len(self.choose_per_stream) != streams or len(self.proportion_per_stream) != streams:
            raise ValueError(f'choose_per_stream and proportion_per_stream need one entry per stream ({streams}).')
        self.epoch_size = int(self.epoch_size)
        if self.epoch_size != int(self.choose_per_stream.sum()):
            raise ValueError(f'epoch_size ({self.epoch_size}) must equal the sum of choose_per_stream '
                             f'({int(self.choose_per_stream.sum())}); derive both with apply_weights.')
        order = self.order  # validates the order arguments (the dataset's checks and messages)
        for name in ('num_canonical_nodes', 'shuffle_block_size'):
            if getattr(order, name) is None:
                raise ValueError(f'EpochPlanner needs `{name}` resolved to a positive integer, got None (see '
                                 f'OrderConfig.resolved and default_{name}).')
        for name in PLANNER_FIELDS:
            setattr(self, name, getattr(order, name))  # normalised: Python ints and bools

    @property
    def order(self) -> OrderConfig:
        """The planner's order arguments as a validated :class:`~streaming_core.ordering.order_config.OrderConfig`."""
        return OrderConfig(**{name: getattr(self, name) for name in PLANNER_FIELDS})

    @property
    def epoch_seed_change(self) -> bool:
        """Whether per-epoch choices vary with the epoch: ``shuffle and sampling_method == 'balanced'``."""
        return bool(self.shuffle) and self.sampling_method == 'balanced'

    @property
    def num_streams(self) -> int:
        """The number of streams."""
        return len(self.shards_per_stream)

    def resampled(self, epoch: int, stream_id: int | None = None) -> Resampled:
        """The epoch's shuffle units with the compact big-to-small map (all streams, or one)."""
        return resample(self.samples_per_shard, self.shards_per_stream, self.choose_per_stream, self.shuffle_seed,
                        epoch, sampling_method=self.sampling_method, granularity=self.sampling_granularity,
                        epoch_seed_change=self.epoch_seed_change, stream_id=stream_id)

    def resample(self, epoch: int, stream_id: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(shuffle units, small_per_big)`` for the epoch (all streams, or one)."""
        res = self.resampled(epoch, stream_id)
        return res.units, res.small_per_big()

    def shuffle_algorithm(self) -> Any:
        """The registered shuffle ``self.shuffle_algo`` (``UnknownNameError`` when not installed)."""
        return get_registry('shuffle').get(self.shuffle_algo)

    def shuffle_units(self, units: NDArray[np.int64], epoch: int, block_size: int | None = None) -> NDArray[np.int64]:
        """The configured shuffle of ``units`` for ``epoch``."""
        block = self.shuffle_block_size if block_size is None else block_size
        return np.asarray(self.shuffle_algorithm()(np.asarray(units, np.int64), self.num_canonical_nodes,
                                                   self.shuffle_seed, epoch, block), np.int64)

    def order_warnings(self) -> list[str]:
        """What is worth telling the user about this order, whatever computes or caches the plan.

        A shuffle that declares ``spreads_shards_within_block`` (``py1e``, ``py1n``) spreads each shard's samples
        over a window of about ``shuffle_block_size`` positions; a shard with more samples than that is shuffled
        less (:data:`BLOCK_WARNING`). The check is deterministic: the largest shard against the block size.
        """
        if not self.shuffle or not len(self.samples_per_shard):
            return []
        if int(self.samples_per_shard.max()) <= self.shuffle_block_size:
            return []
        return [BLOCK_WARNING] if shuffle_declares(self.shuffle_algorithm(), 'spreads_shards_within_block') else []

    def warn(self, stacklevel: int = 2) -> None:
        """Give the :meth:`order_warnings` as ``UserWarning`` (called for every plan, computed or from the cache)."""
        for message in self.order_warnings():
            warnings.warn(message, UserWarning, stacklevel=stacklevel + 1)

    def stream_block_size(self, stream_id: int) -> int:
        """Shuffle block size for one stream shuffled alone: ``int(block * proportion)``, at least 1.

        The reference uses ``int(shuffle_block_size * proportion)``, which reaches 0 for a small stream and then
        crashes inside the shuffle (or raises, for ``device_per_stream``); it is clamped to 1 here instead.
        """
        return max(int(self.shuffle_block_size * float(self.proportion_per_stream[stream_id])), 1)

    def _check_call(self, world: 'World', epoch: int, sample_in_epoch: int) -> None:
        if epoch < 0:
            raise ValueError(f'epoch must be non-negative, got {epoch}.')
        if sample_in_epoch < 0:
            raise ValueError(f'sample_in_epoch must be non-negative, got {sample_in_epoch}.')
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f'Please pass `batch_size` to StreamingDataset (a positive integer per device); the '
                             f'epoch cannot be planned without it. Got {self.batch_size!r}.')
        for name in ('num_nodes', 'ranks_per_node', 'workers_per_rank'):
            if not hasattr(world, name):
                raise TypeError(f'world must be a streaming_core.World, got {type(world).__name__}.')

    def plan(self, world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
        """The whole parallel world's partition for ``epoch``: ``(PN, R, Wk, batches, B)`` small sample IDs."""
        self._check_call(world, epoch, sample_in_epoch)
        self.warn()
        method = get_registry('batching').get(self.batching_method)
        return method(self, world, epoch, sample_in_epoch)

    def plan_node(self, world: 'World', epoch: int, sample_in_epoch: int, node: int) -> NDArray[np.int64]:
        """Node ``node``'s slice of :meth:`plan`: ``(R, Wk, batches, B)``, computing only what that node reads when
        the batching method offers a ``plan_node`` attribute (``random`` does, for an ``orig``-compatible partition
        and a shuffle with ``node_share``; it returns None when it cannot).
        """
        self._check_call(world, epoch, sample_in_epoch)
        self.warn()
        if not 0 <= node < world.num_nodes:
            raise ValueError(f'node {node} is out of range for a world of {world.num_nodes} nodes.')
        method = get_registry('batching').get(self.batching_method)
        node_plan = getattr(method, 'plan_node', None)
        if node_plan is not None:
            fast = node_plan(self, world, epoch, sample_in_epoch, node)
            if fast is not None:
                return fast
        return np.ascontiguousarray(method(self, world, epoch, sample_in_epoch)[node])


def random_batching(planner: EpochPlanner, world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
    """The reference's ``random`` batching (runtime.md section 5.1).

    Resample every stream, partition the epoch's canonical positions over the world, map positions through the
    shuffle (when shuffling) to big IDs, then to small IDs.
    """
    res = planner.resampled(epoch)
    ids = get_partitions(planner.partition_algo, planner.epoch_size, planner.num_canonical_nodes, world.num_nodes,
                         world.ranks_per_node, world.workers_per_rank, planner.batch_size, sample_in_epoch,
                         planner.initial_physical_nodes)
    if planner.shuffle:
        perm = planner.shuffle_units(res.units, epoch)
        pad = ids < 0
        ids = perm[ids]
        ids[pad] = -1
        del perm
    return res.to_small(ids, out=ids)


def _node_shares(planner: EpochPlanner, units: NDArray[np.int64], epoch: int,
                 nodes: list[int]) -> dict[int, NDArray[np.integer]] | None:
    algo = planner.shuffle_algorithm()
    args = (units, planner.num_canonical_nodes, planner.shuffle_seed, epoch, planner.shuffle_block_size)
    many = getattr(algo, 'nodes_share', None)
    if many is not None:
        try:
            takes_dtype = 'dtype' in inspect.signature(many).parameters
        except (TypeError, ValueError):
            takes_dtype = False
        if takes_dtype and planner.epoch_size < 1 << 32:  # halves the memory of the shares
            return many(*args, nodes, dtype=np.uint32)
        return many(*args, nodes)
    one = getattr(algo, 'node_share', None)
    if one is None:
        return None
    return {c: np.asarray(one(*args, c)) for c in nodes}


def _random_node_plan(planner: EpochPlanner, world: 'World', epoch: int, sample_in_epoch: int,
                      node: int) -> NDArray[np.int64] | None:
    """The fast path of :meth:`EpochPlanner.plan_node` for ``random`` batching, or None when it does not apply."""
    num, ncn = planner.epoch_size, planner.num_canonical_nodes
    pn, ranks, workers, batch = world.num_nodes, world.ranks_per_node, world.workers_per_rank, planner.batch_size
    check_drop_first(num, pn, ranks, sample_in_epoch)
    if resolve_partition_algo(planner.partition_algo, ncn, pn, planner.initial_physical_nodes) != 'orig':
        return None
    layout = NodeLayout(num, ncn, pn, ranks, sample_in_epoch, node)
    if not layout.fast:
        return None
    res = planner.resampled(epoch)
    canon = layout.canonical_nodes()
    buf: NDArray[np.integer] | None = None
    base = np.zeros(ncn, np.int64)
    if planner.shuffle and canon:
        shares = _node_shares(planner, res.units, epoch, canon)
        if shares is None:
            return None
        offset = 0
        for c in canon:
            base[c] = offset - c * num // ncn
            offset += len(shares[c])
        buf = shares[canon[0]] if len(canon) == 1 else np.concatenate([shares[c] for c in canon])
        del shares
    per_rank = layout.length // ranks
    group = workers * batch
    batches = num_batches(layout.length, ranks, workers, batch)
    out = np.empty((ranks, workers, batches, batch), np.int64)
    view = out.transpose(0, 2, 1, 3)  # (R, batches, Wk, B): rank list order
    step = max(1, _CHUNK // (group * ranks))
    for j0 in range(0, batches, step):
        j1 = min(batches, j0 + step)
        i0, i1 = j0 * group, min(j1 * group, per_rank)
        big, row = layout.positions(i0 * ranks, i1 * ranks)
        if buf is not None:
            big += base[canon[0]] if len(canon) == 1 else base[row]
            big = buf[big].astype(np.int64)
        del row
        vals = np.full((j1 - j0) * group * ranks, -1, np.int64)
        res.to_small(big, out=vals[:len(big)])
        del big
        view[:, j0:j1] = vals.reshape(j1 - j0, group, ranks).transpose(2, 0, 1).reshape(ranks, j1 - j0, workers,
                                                                                       batch)
    return out


random_batching.plan_node = _random_node_plan  # the node-level fast path a batching method may declare
