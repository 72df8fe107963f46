"""``StreamingDataset``: stream samples from one or more streams, deterministically, with mid-epoch resumption."""

from __future__ import annotations

import logging
import math
import numbers
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from torch.utils.data import IterableDataset

from streaming_core.common.arguments import bytes_to_int
from streaming_core.common.fork_safe import CarriedEnvironment, carried_environment
from streaming_core.errors import CacheLimitError
from streaming_core.machinery.protocols import ShardReader
from streaming_core.ordering.order_config import OrderConfig, OrderField, parse_epoch_size
from streaming_core.ordering.rank_versions import VersionCheck
from streaming_core.ordering.weights import apply_weights
from streaming_core.ordering.world import World, parallel_ranks, register_node
from streaming_core.reading.catalogue import CatalogueAttributes, ShardCatalogue, ShardSource, no_samples
from streaming_core.reading.dataset_arguments import (
    LengthAttribute,
    TransformAttribute,
    build_streams,
    check_cache_limit,
    check_run_arguments,
    index_bytes,
    stream_class,
)
from streaming_core.reading.numpy_indexing import getitem
from streaming_core.reading.resharding import refuse_foreign_sharding
from streaming_core.reading.shard_manager import ShardManager
from streaming_core.reading.shared_state import MAIN_SLOT, SharedState, slot_of
from streaming_core.reading.stream import Stream

if TYPE_CHECKING:  # imported when first used: `import streaming_core` stays light (issue 14's import row)
    from streaming_core.ordering.planner import EpochPlanner
    from streaming_core.reading.state_dict import WorkerPosition

__all__ = ['StreamingDataset']

logger = logging.getLogger('streaming_core.reading.dataset')

#: Datasets with at least this many samples per epoch plan the next epoch in the background.
PLAN_AHEAD_MIN = 1 << 19


class StreamingDataset(CatalogueAttributes, IterableDataset):
    """A dataset streamed from remote storage (or read in place), with the reference's arguments and order.

    Give either ``streams`` or ``remote``/``local``. All arguments are keyword-only. Beyond mosaicml-streaming:
    ``world`` (an explicit :class:`~streaming_core.ordering.world.World`; otherwise detected when iteration starts),
    ``storage_options`` (per-dataset backend options; a ``Stream`` may carry its own), and ``download_retry``
    counts retries after the first attempt (``0`` means one attempt).

    Args:
        streams: The streams to mix.
        remote: The remote of the single stream built when ``streams`` is not given.
        local: Its local directory (default: under the cache root, derived from ``remote``).
        split: The split subdirectory (also the default split of every stream).
        download_retry: Retries per download after the first attempt.
        download_timeout: Per-request timeout in seconds (and the bound of every wait for another process).
        validate_hash: A hash name checked on downloaded files.
        keep_zip: Keep compressed files after decompression.
        epoch_size: Samples per epoch (int or ``'100k'``-style); streams are weighted to fill it.
        predownload: Samples to prepare ahead of the training loop (default ``8 * batch_size``, or 64).
        cache_limit: Bytes the node's cache may hold (int or ``'100gb'``); cold shards are evicted.
        sampling_method: ``'balanced'`` or ``'fixed'``.
        sampling_granularity: Samples per pick when a stream is partially repeated.
        partition_algo: ``'orig'`` or ``'relaxed'``.
        num_canonical_nodes: The number of canonical nodes (keep it fixed for elastic determinism).
        batch_size: The per-device batch size.
        shuffle: Shuffle the samples.
        shuffle_algo: A registered shuffle name (``'py1e'``, ``'py1s'``, ``'naive'``...).
        shuffle_seed: The shuffle seed.
        shuffle_block_size: The shuffle block size (default ``max(4_000_000 // NCN, 1 << 18)``).
        batching_method: A registered batching method name (``'random'``, ``'stratified'``...).
        allow_unsafe_types: Allow ``pkl`` columns (unpickling can run code).
        replication: Number of consecutive ranks that receive identical samples.
        world: An explicit world; otherwise torch.distributed or the environment, read at iteration.
        storage_options: Storage backend options for streams that do not set their own.
        max_open_shards: Shards kept open per process for random access.
        on_bad_sample: ``'raise'`` (default): a sample that fails to decode raises in the training loop.
            ``'replace'``: it is logged and replaced by the nearest good sample of the same worker, so every rank
            still takes the same number of steps (a whole shard that cannot be read still raises).
        format: For a stream without ``index.json``: the format that indexes its files (``'parquet'``...);
            default: detected from the files when unambiguous (also a per-``Stream`` argument).
        columns: Read only these columns, for formats whose index builder takes the ``columns`` option (Parquet);
            the same as ``format_options={'columns': [...]}`` (also a per-``Stream`` argument).
        format_options: Options of the format's index builder, for every stream (a stream's own options win); an
            option the format does not take is a ``FormatOptionError`` naming it.
        transform: A callable applied to every sample :meth:`get_item` returns, on every path (iteration,
            ``dataset[i]``, slices); it must be picklable for spawned DataLoader workers (a module-level function
            or a ``torchvision.transforms`` object, not a lambda). ``dataset.transform`` reads or replaces it; in a
            subclass, ``self.transform`` is the subclass's own attribute, which it applies itself (the reference's
            pattern), never applied again by this class (:class:`~streaming_core.reading.dataset_arguments.
            TransformAttribute`).

    The ``streams`` given are never modified: the dataset works on its own copies (``dataset.streams``).

    The order arguments (``shuffle``, ``shuffle_algo``, ``shuffle_seed``, ``shuffle_block_size``,
    ``num_canonical_nodes``, ``partition_algo``, ``batching_method``, ``sampling_method``, ``sampling_granularity``,
    ``batch_size``, ``replication``) are attributes over one validated
    :class:`~streaming_core.ordering.order_config.OrderConfig`, ``dataset.order_config``: assigning one checks it as the
    argument is checked, and every epoch's planner is built from that config.
    """

    shuffle = OrderField()
    shuffle_algo = OrderField()
    shuffle_seed = OrderField()
    shuffle_block_size = OrderField()
    num_canonical_nodes = OrderField()
    partition_algo = OrderField()
    batching_method = OrderField()
    sampling_method = OrderField()
    sampling_granularity = OrderField()
    batch_size = OrderField()
    replication = OrderField()
    transform = TransformAttribute()

    def __init__(self, *, streams: Sequence[Stream] | None = None, remote: str | None = None,
                 local: str | None = None, split: str | None = None, download_retry: int = 2,
                 download_timeout: float = 60.0, validate_hash: str | None = None, keep_zip: bool = False,
                 epoch_size: int | str | None = None, predownload: int | None = None,
                 cache_limit: int | str | None = None, sampling_method: str = 'balanced',
                 sampling_granularity: int = 1, partition_algo: str = 'relaxed',
                 num_canonical_nodes: int | None = None, batch_size: int | None = None, shuffle: bool = False,
                 shuffle_algo: str = 'py1e', shuffle_seed: int = 9176, shuffle_block_size: int | None = None,
                 batching_method: str = 'random', allow_unsafe_types: bool = False, replication: int | None = None,
                 stream_name: str = 'stream', stream_config: Mapping[str, Any] | None = None,
                 world: World | None = None, storage_options: Mapping[str, Any] | None = None,
                 max_open_shards: int = 64, on_bad_sample: str = 'raise',
                 transform: Callable[[Any], Any] | None = None, format: str | None = None,
                 columns: Sequence[str] | None = None, format_options: Mapping[str, Any] | None = None) -> None:
        if bool(streams) == (bool(remote) or bool(local)):
            raise ValueError('You must provide either `streams` or `remote`/`local`, but not both.')
        self.order_config = OrderConfig(
            shuffle=shuffle, shuffle_algo=shuffle_algo, shuffle_seed=shuffle_seed,
            shuffle_block_size=shuffle_block_size, num_canonical_nodes=num_canonical_nodes,
            partition_algo=partition_algo, batching_method=batching_method, sampling_method=sampling_method,
            sampling_granularity=sampling_granularity, batch_size=batch_size, replication=replication)
        self.order_config.check_registered()
        check_run_arguments(predownload, world, on_bad_sample, transform)
        self.on_bad_sample = on_bad_sample
        self._sample_transform = transform  # not self.transform: see TransformAttribute
        stream_cls = stream_class(stream_name) if not streams else Stream  # ignored with `streams`, as the reference

        self.split = split
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        self.allow_unsafe_types = bool(allow_unsafe_types)
        self.predownload = predownload if predownload is not None else (
            8 * self.batch_size if self.batch_size is not None else 64)
        if self.batch_size is not None and self.predownload < self.batch_size:
            warnings.warn(f'predownload ({self.predownload}) < batch_size ({self.batch_size}): the training loop '
                          f'may wait for downloads.', stacklevel=2)
        self._explicit_world = world
        self._world_snapshot: World | None = None
        self.initial_physical_nodes: int | None = None
        parsed_epoch_size = parse_epoch_size(epoch_size)

        # Streams (our own copies: the user's Stream objects are inputs; defaults and resolved weights go into ours)
        # and their indexes.
        self.streams = build_streams(
            streams, stream_cls, remote=remote, local=local, split=split, download_retry=download_retry,
            download_timeout=download_timeout, validate_hash=validate_hash, keep_zip=keep_zip,
            stream_config=stream_config, storage_options=storage_options, format=format, columns=columns,
            format_options=format_options)
        self.num_streams = len(self.streams)
        self.catalogue = self._load_catalogue()
        self.layout_identity = self.catalogue.layout_identity()
        self._version_check = VersionCheck.of_dataset(self.streams, self.catalogue)
        #: A digest of every stream's shard names, hashes and sample counts (the same for a copy of the data on any
        #: machine); states record it, and a state of another dataset is refused.
        self.content_version = self._version_check.content
        self._version_check.run()  # ranks of one job on different versions: an error (now, or once a group exists)

        # Cache limit.
        self.cache_limit = bytes_to_int(cache_limit) if cache_limit else None
        if self.cache_limit is not None:
            check_cache_limit(self.cache_limit, self.streams, self.catalogue)

        # Weights.
        choose, proportion, repeat, total = apply_weights(
            [s.proportion for s in self.streams], [s.repeat for s in self.streams],
            [s.choose for s in self.streams], self.samples_per_stream.tolist(), parsed_epoch_size, self.shuffle_seed)
        for stream, c, p, r in zip(self.streams, choose, proportion, repeat):
            stream.choose, stream.proportion, stream.repeat = int(c), float(p), float(r)
        self.epoch_size = int(total)

        self._index_bytes = index_bytes(self.streams)
        shard_budget = None if self.cache_limit is None else self.cache_limit - self._index_bytes
        self._shards_manager = ShardManager(self.catalogue, shard_budget, max_open=max_open_shards)
        self._state = SharedState()
        if world is None:
            register_node()
        self._position: WorkerPosition | None = None
        self._worker_resume: dict[str, Any] | None = None
        self._counted_at_end: tuple[int, int] | None = None  # (slot, epoch) of a per-worker resume being read
        self._epoch_totals: dict[tuple[Any, ...], int] = {}

    def _load_catalogue(self) -> ShardCatalogue:
        """The streams' shards: each stream's mapped shard table, or, for a stream whose class overrides
        ``get_shards``, the readers that method returns (called by keyword with the reference's arguments)."""
        if not any(stream.overrides_get_shards() for stream in self.streams):
            return ShardCatalogue.load(self.streams, self.allow_unsafe_types)
        world = self._rank_world()
        sources: list[ShardSource] = []
        for stream in self.streams:
            if stream.overrides_get_shards():
                readers: list[ShardReader] = list(stream.get_shards(world=world,
                                                                    allow_unsafe_types=self.allow_unsafe_types))
                samples = sum(int(reader.samples) for reader in readers)
                source: ShardSource = readers
            else:
                table = stream.shard_table(self.allow_unsafe_types)
                samples = int(table.samples_per_shard.sum())
                source = table
            if samples == 0:
                raise no_samples(stream)
            sources.append(source)
        return ShardCatalogue(self.streams, sources)

    @property
    def shard_manager(self) -> ShardManager:
        """This dataset's shard manager (preparation, open views, eviction)."""
        return self._shards_manager

    # ----------------------------------------------------------------------------------------------------------
    # World, epochs and planning.
    def __getstate__(self) -> dict[str, Any]:
        check = getattr(self, '_version_check', None)
        if check is not None:
            check.run()  # pickled for spawned DataLoader workers or ranks: the rank's main process compares first
        # First: set in the unpickling process before the catalogue after it is rebuilt (and may read storage).
        state = {'_carried_env': CarriedEnvironment(carried_environment()), **self.__dict__}
        state['_position'] = None  # this process's iterator (threads, open views) stays here
        snapshot = World.from_torch_distributed() if state.get('_explicit_world') is None else None
        if snapshot is not None:
            state['_world_snapshot'] = snapshot
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.pop('_carried_env', None)  # set when it was unpickled (CarriedEnvironment)
        self.__dict__.update(state)

    def _rank_world(self) -> World:
        if self._explicit_world is not None:
            return World.detect(self._explicit_world)
        detected = World.from_torch_distributed()
        if detected is not None:
            return detected
        if self._world_snapshot is not None:
            return self._world_snapshot
        return World.from_env()

    @property
    def world(self) -> World:
        """The rank-level world as detected now (explicit, torch.distributed, environment, or one process)."""
        return self._rank_world()

    def _worker_world(self) -> World:
        return self._rank_world().with_dataloader_worker()

    def _resolve_order_defaults(self, parallel: World) -> None:
        resume = self._worker_resume or self._state.read_resume()
        if resume is not None:
            self._adopt(resume)
        self.order_config = self.order_config.resolved(parallel.num_nodes)

    def _adopt(self, resume: Mapping[str, Any]) -> None:
        self.order_config = replace(self.order_config, num_canonical_nodes=int(resume['num_canonical_nodes']),
                                    shuffle_seed=int(resume['shuffle_seed']))
        if resume.get('initial_physical_nodes') is not None:
            self.initial_physical_nodes = int(resume['initial_physical_nodes'])

    def _planner(self) -> EpochPlanner:
        from streaming_core.ordering.planner import EpochPlanner
        return EpochPlanner(
            samples_per_shard=self.samples_per_shard, shards_per_stream=self.shards_per_stream,
            choose_per_stream=np.array([s.choose for s in self.streams], dtype=np.int64),
            proportion_per_stream=np.array([s.proportion for s in self.streams], dtype=np.float64),
            epoch_size=self.epoch_size, initial_physical_nodes=self.initial_physical_nodes,
            **{**self.order_config.planner_arguments(), 'batch_size': self._batch_size()})

    def _batch_size(self) -> int:
        if self.batch_size is None:
            if not getattr(self, '_warned_batch_size', False):
                warnings.warn('StreamingDataset got no `batch_size`; assuming 1. Pass the per-device batch size so '
                              'that each device receives whole batches in the deterministic order.', stacklevel=3)
                self._warned_batch_size = True
            return 1
        return self.batch_size

    def get_plan(self, world: World, epoch: int = 0, sample_in_epoch: int = 0) -> NDArray[np.int64]:
        """The whole parallel world's plan for ``epoch``: ``(nodes, ranks, workers, batches, batch_size)`` sample ids
        (``-1`` is padding), as every rank and worker of ``world`` would read it."""
        parallel = world.replicate(self.replication)
        self._resolve_order_defaults(parallel)
        return self._planner().plan(parallel, epoch, sample_in_epoch)

    def epoch_total(self, epoch: int, world: World | None = None) -> int:
        """The samples the whole world consumes in a full ``epoch`` (the padded global count: ``epoch_size``
        plus the repeats that give every rank the same number of samples). A state whose ``sample_in_epoch``
        reaches it means the epoch is over."""
        parallel = (world or self._rank_world()).replicate(self.replication)
        parallel = replace(parallel, worker=0, workers_per_rank=1)
        self._resolve_order_defaults(parallel)
        key = (epoch, parallel.num_nodes, parallel.ranks_per_node, self.num_canonical_nodes, self.shuffle_seed,
               self.initial_physical_nodes, self._batch_size())
        total = self._epoch_totals.get(key)
        if total is None:
            from streaming_core.ordering.plan_cache import node_plan
            plan = node_plan(self._planner(), parallel, epoch, 0, parallel.node)
            total = int(np.count_nonzero(np.asarray(plan) >= 0)) * parallel.num_nodes
            self._epoch_totals[key] = total
        return total

    def _is_over(self, epoch: int, sample_in_epoch: int, world: World | None = None) -> bool:
        return sample_in_epoch >= self.epoch_size and sample_in_epoch >= self.epoch_total(epoch, world)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration start ``epoch`` (trainers call this at the start of every epoch).

        After :meth:`load_state_dict`, the same epoch keeps the loaded position; another epoch starts from its
        beginning and the loaded position is dropped (logged).
        """
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
            raise ValueError(f'set_epoch expects a non-negative integer epoch, got {epoch!r}.')
        refuse_foreign_sharding(self)
        epoch = int(epoch)
        resume = self._worker_resume or self._state.pending_resume(MAIN_SLOT)
        if resume is not None and int(resume['epoch']) != epoch:
            if self._worker_resume is not None or not self._state.resume_started():  # (else workers started from it)
                logger.warning('set_epoch(%d) drops the loaded position (epoch %d, sample %d): epoch %d starts from '
                               'its beginning.', epoch, int(resume['epoch']), int(resume['sample_in_epoch']), epoch)
            self._worker_resume = None
            self._state.clear_resume()
        current = self._state.current()
        if current is not None and current[0] == epoch - 1 and resume is None:
            return  # the epoch counter already agrees (the usual call before each epoch)
        self._state.set_next_epoch(epoch)

    def _start_epoch(self, world: World, parallel: World) -> tuple[int, int, int]:
        """Start this worker's next epoch: ``(epoch, global start offset, samples of this worker to skip)``."""
        slot = slot_of(world.worker)
        position = self._worker_resume
        self._counted_at_end = None
        if position is not None:
            self._worker_resume = None
            from streaming_core.reading.state_dict import loader_had_finished, worker_start
            epoch, offset, skip, finished = worker_start(position, world, parallel, self._batch_size)
            timeout = max(s.wait_timeout for s in self.streams)
            if loader_had_finished(self._state, slot, world, epoch, offset, finished, timeout):
                epoch, offset, skip = epoch + 1, 0, 0
            # torchdata builds one iterator from a loaded state and, when that state says the loader had finished,
            # discards it and builds a fresh one: the resumed epoch counts as started only once it is read through.
            self._counted_at_end = (slot, epoch)
        else:
            self._state.clear_resumed(slot)
            epoch, offset, skip = self._state.next_epoch(slot), 0, 0
            resume = self._state.pending_resume(slot)
            if resume is not None:
                self._check_resume_world(resume, parallel)
                self._state.consume_resume(slot)
                epoch, offset = int(resume['epoch']), int(resume['sample_in_epoch'])
        if offset and self._is_over(epoch, offset, world):
            from streaming_core.reading.state_dict import warn_past_the_epoch
            warn_past_the_epoch(epoch, offset, max(self.epoch_size, self.epoch_total(epoch, world)),
                                self.num_canonical_nodes)
            epoch, offset, skip = epoch + 1, 0, 0
        self._state.begin_epoch(slot, epoch, offset)
        if self._counted_at_end is not None:
            self._state.set_next_of(slot, epoch)
        return epoch, offset, skip

    def _worker_sample_ids(self, world: World) -> tuple[int, NDArray[np.int64]]:
        """Start this worker's next epoch: ``(epoch, this worker's sample ids in order)``."""
        epoch, _, skip, ids = self._begin(world)
        return epoch, ids[skip:]

    def _begin(self, world: World) -> tuple[int, int, int, NDArray[np.int64]]:
        from streaming_core.ordering.plan_cache import node_plan
        parallel = world.replicate(self.replication)
        self._resolve_order_defaults(parallel)
        epoch, offset, skip = self._start_epoch(world, parallel)
        plan = node_plan(self._planner(), parallel, epoch, offset, parallel.node)
        ids = np.asarray(plan[parallel.rank_of_node, parallel.worker]).reshape(-1)
        return epoch, offset, skip, ids[ids >= 0].astype(np.int64, copy=False)  # the mask already copied

    def _sample_reader(self) -> Callable[[int], Any] | None:
        """What iteration calls per sample id: None (read the shard view directly) unless a subclass or the instance
        overrides ``__getitem__`` or ``get_item``, whose override must then see every sample."""
        cls = type(self)
        own = vars(self)
        if (cls.__getitem__ is StreamingDataset.__getitem__ and cls.get_item is StreamingDataset.get_item
                and '__getitem__' not in own and 'get_item' not in own):
            return None
        return self.__getitem__

    def __iter__(self) -> Iterator[Any]:
        """Iterate over this rank's (and DataLoader worker's) samples of the next epoch."""
        from streaming_core.reading.iteration import EpochIterator, gc_paused
        refuse_foreign_sharding(self)
        check = getattr(self, '_version_check', None)
        if check is not None:
            check.run()
        world = self._worker_world()
        epoch, offset, skip, ids = self._begin(world)
        ahead = (lambda: self._plan_ahead(world, epoch + 1)) if self.epoch_size >= PLAN_AHEAD_MIN else None
        with gc_paused():
            iterator = EpochIterator(self, ids[skip:], epoch, on_prefetched=ahead, read=self._sample_reader(),
                                     transform=self._sample_transform)
        from streaming_core.reading.state_dict import WorkerPosition
        self._position = WorkerPosition(epoch, offset, skip, len(ids), world.worker, world.workers_per_rank,
                                        world.replicate(self.replication).num_ranks, iterator)
        if self._counted_at_end is not None:
            return self._count_when_read_through(iter(iterator), *self._counted_at_end)
        return iter(iterator)

    def _count_when_read_through(self, samples: Iterator[Any], slot: int, epoch: int) -> Iterator[Any]:
        yield from samples
        self._state.set_next_of(slot, epoch + 1)

    def _plan_ahead(self, world: World, epoch: int) -> None:
        """Compute (and share on the node) the next epoch's plan while this one finishes."""
        from streaming_core.ordering.plan_cache import node_plan
        try:
            if self._state.pending_resume(slot_of(world.worker)) is not None:
                return  # a resume state decides the next epoch's start
            parallel = world.replicate(self.replication)
            node_plan(self._planner(), parallel, epoch, 0, parallel.node)
        except Exception as err:  # only an optimisation: the next epoch computes it itself
            logger.debug('planning epoch %d ahead failed: %s', epoch, err)

    # ----------------------------------------------------------------------------------------------------------
    # Resumption.
    def state_dict(self, num_samples: int | None = None, from_beginning: bool = True) -> dict[str, Any]:
        """The resumption state.

        With ``num_samples`` (the reference's form, what :class:`StreamingDataLoader` calls): the state after
        ``num_samples`` samples consumed by the whole world (all ranks) in the current epoch. Without arguments (the
        ``Stateful`` protocol of torchdata's ``StatefulDataLoader``, which calls it in each DataLoader worker): the
        position of this process or worker, which resumes exactly with the same ``num_workers``.

        A state that covers the whole epoch is returned as the start of the next one (``sample_in_epoch`` 0).

        Args:
            num_samples: Samples consumed by the whole world in the current epoch (or since the resume point).
            from_beginning: True if ``num_samples`` counts from the start of the epoch, False if it counts from the
                point this run resumed at.
        """
        parallel = self._rank_world().replicate(self.replication)
        self._resolve_order_defaults(parallel)
        if num_samples is None:
            return self._position_state(parallel)
        if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral) or num_samples < 0:
            raise ValueError(f'state_dict: `num_samples` must be a non-negative integer, got {num_samples!r}.')
        current, resume = self._state.current(), None
        if current is None:  # nothing began since construction, set_epoch or load_state_dict
            resume = self._state.pending_resume(MAIN_SLOT)
            if resume is not None:
                epoch, offset = int(resume['epoch']), int(resume['sample_in_epoch'])
            else:
                epoch, offset = self._state.max_next_epoch(), 0
                if epoch == 0:
                    epoch = -1  # before the first iteration, as the reference says (it loads as the start of 0)
            sample_in_epoch = int(num_samples) if from_beginning else offset + int(num_samples)
        else:
            epoch, offset = current
            sample_in_epoch = int(num_samples) if from_beginning else offset + int(num_samples)
        state = self._state_for(epoch, sample_in_epoch, parallel)
        if current is None and resume is not None:  # the loaded position, counted on the world that saved it
            state.pop('parallel_shape', None)
            if resume.get('parallel_shape') is not None:
                state['parallel_shape'] = list(resume['parallel_shape'])
        return state

    def _check_resume_world(self, resume: Mapping[str, Any] | None = None, parallel: World | None = None) -> None:
        """Refuse a loaded state (default: the pending one) saved on another data-parallel world when the batching
        method is not elastic (:func:`~streaming_core.reading.state_dict.check_parallel_shape`); the
        :class:`StreamingDataLoader` calls it in the main process before its workers start."""
        resume = resume if resume is not None else self._state.pending_resume(MAIN_SLOT)
        if resume is None:
            return
        from streaming_core.machinery.host import get_registry
        from streaming_core.reading.state_dict import check_parallel_shape
        parallel = parallel or self._rank_world().replicate(self.replication)
        check_parallel_shape(resume, parallel, self.batching_method, get_registry('batching').get(self.batching_method))

    def _state_for(self, epoch: int, sample_in_epoch: int, parallel: World) -> dict[str, Any]:
        # _is_over replicates the rank world itself: ``parallel`` is already replicated
        if epoch >= 0 and sample_in_epoch and self._is_over(epoch, sample_in_epoch):
            epoch, sample_in_epoch = epoch + 1, 0
        initial = self.initial_physical_nodes if self.initial_physical_nodes is not None else parallel.num_nodes
        from streaming_core.reading.state_dict import make_state
        return make_state(epoch, sample_in_epoch, self.num_canonical_nodes, self.shuffle_seed, initial,
                          self.layout_identity, self.content_version, (parallel.num_nodes, parallel.ranks_per_node))

    def _position_state(self, parallel: World) -> dict[str, Any]:
        position = self._position
        if position is None:
            return self.state_dict(0, False)
        state = self._state_for(position.epoch, position.offset, parallel)
        if state['epoch'] != position.epoch:  # (an offset can only be over after a resume at an epoch end)
            return state
        state['worker_position'] = position.fields()
        return state

    def load_state_dict(self, obj: Mapping[str, Any]) -> None:
        """Resume from a state dict (ours, torchdata's per-worker one, or mosaicml-streaming's) at the next
        iteration, in every worker. A state whose ``sample_in_epoch`` covers its epoch resumes at the next epoch."""
        from streaming_core.reading.state_dict import parse_state
        state = parse_state(obj, self.layout_identity, self.content_version)
        if 'worker_position' in state:
            self._worker_resume = state  # this process's own position (torchdata loads it in each worker)
        else:
            self._worker_resume = None
            self._state.write_resume(state)
            self._state.set_next_epoch(state['epoch'])
        self._position = None
        self._adopt(state)

    # ----------------------------------------------------------------------------------------------------------
    # Sizes.
    @property
    def size(self) -> int:
        """The number of underlying samples (ignoring stream weighting)."""
        return self.num_samples

    def __len__(self) -> int:
        """Samples per device per epoch: ``ceil(epoch_size / ranks)`` (the reference's meaning), or the ``length`` a
        subclass assigned to ``self.length`` (the reference's ``__len__`` returns that attribute)."""
        own = self.__dict__.get('length')
        if own is not None:
            return int(own)
        return math.ceil(self.epoch_size / parallel_ranks(self._explicit_world, self._world_snapshot, self.replication))

    length = LengthAttribute()

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration of this rank would start (before any resume state)."""
        return self._state.max_next_epoch()

    @property
    def cache_usage(self) -> int:
        """Bytes this dataset's cache holds node-wide: the index files plus the shard files present (kept count of
        with a cache limit; without one, looked up: one ``stat`` per shard file)."""
        cache = self._shards_manager.cache
        return self._index_bytes + (cache.usage if cache is not None else self._shards_manager.present_bytes())

    # ----------------------------------------------------------------------------------------------------------
    # Random access.
    def get_item(self, sample_id: int, retry: int = 7) -> Any:
        """The sample with this global id, downloading its shard if needed (``retry`` is accepted for compatibility;
        preparation already retries downloads)."""
        catalogue = self.catalogue
        if not 0 <= sample_id < catalogue.num_samples:
            raise IndexError(f'Invalid sample index {sample_id}: the dataset has {catalogue.num_samples} samples.')
        return self._shards_manager.sample(*catalogue.spanner[sample_id])

    def __getitem__(self, at: Any) -> Any:
        """NumPy-style indexing: an int (negative counts from the end), a slice, a list or an array of ids (the
        ``transform``, if any, applied to each sample)."""
        item = self.get_item if self._sample_transform is None else self._transformed_item
        return getitem(at, self.catalogue.num_samples, item, self.__getitem__)

    def _transformed_item(self, sample_id: int) -> Any:
        sample = self.get_item(sample_id)
        transform = self._sample_transform
        return sample if transform is None else transform(sample)

    def prepare_shard(self, shard_id: int, blocking: bool = True) -> None:
        """Download (and decompress) one shard now."""
        self._shards_manager.prepare(int(shard_id))

    def evict_shard(self, shard_id: int) -> None:
        """Remove one shard from the local cache (never one without a remote copy, never one being read)."""
        self._shards_manager.evict(int(shard_id))

    def evict_coldest_shard(self) -> None:
        """Remove the least recently used evictable shard."""
        cache = self._shards_manager.cache
        if cache is None:
            raise CacheLimitError('evict_coldest_shard needs a cache_limit.')
        if cache.evict_coldest() < 0:
            raise CacheLimitError('Attempted shard eviction, but there are no shards present locally to evict. '
                                  'Your cache limit may be too low.')

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(streams={self.streams!r}, samples={self.num_samples}, '
                f'epoch_size={self.epoch_size}, shuffle={self.shuffle}, shuffle_algo={self.shuffle_algo!r})')
