"""``StreamingDataset``: stream samples from one or more streams, deterministically, with mid-epoch resumption."""

from __future__ import annotations

import bisect
import logging
import math
import numbers
import os
import warnings
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from torch.utils.data import IterableDataset

from streaming_core.errors import CacheLimitError, EmptyDatasetError
from streaming_core.indexing import getitem
from streaming_core.planning import EpochPlanner, apply_weights, default_num_canonical_nodes, default_shuffle_block_size
from streaming_core.registry import get_registry
from streaming_core.shards import ShardManager
from streaming_core.shared_state import SharedState
from streaming_core.spanner import Spanner
from streaming_core.stream import Stream
from streaming_core.util import bytes_to_int, gc_paused, number_abbrev_to_int
from streaming_core.world import World

__all__ = ['StreamingDataset']

logger = logging.getLogger('streaming_core.dataset')

_PARTITION_ALGOS = ('orig', 'relaxed')
_SAMPLING_METHODS = ('balanced', 'fixed')
_STATE_KEYS = ('epoch', 'sample_in_epoch', 'num_canonical_nodes', 'shuffle_seed')
#: Datasets with at least this many samples per epoch plan the next epoch in the background.
PLAN_AHEAD_MIN = 1 << 19


class StreamingDataset(IterableDataset):
    """A dataset streamed from remote storage (or read in place), with the reference's arguments and order.

    Give either ``streams`` or ``remote``/``local``. All arguments are keyword-only. Beyond mosaicml-streaming:
    ``world`` (an explicit :class:`~streaming_core.world.World`; otherwise detected when iteration starts),
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
    """

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
                 max_open_shards: int = 64, on_bad_sample: str = 'raise') -> None:
        if bool(streams) == (bool(remote) or bool(local)):
            raise ValueError('You must provide either `streams` or `remote`/`local`, but not both.')
        if sampling_method not in _SAMPLING_METHODS:
            raise ValueError(f'Invalid sampling method: {sampling_method}. Must be one of {list(_SAMPLING_METHODS)}.')
        if isinstance(sampling_granularity, bool) or not isinstance(sampling_granularity, numbers.Integral) \
                or sampling_granularity <= 0:
            raise ValueError(f'`sampling_granularity` must be a positive integer, but got: {sampling_granularity}.')
        if partition_algo not in _PARTITION_ALGOS:
            raise ValueError(f'Invalid partition_algo: {partition_algo!r}. Must be one of {list(_PARTITION_ALGOS)}.')
        if isinstance(shuffle_seed, bool) or not isinstance(shuffle_seed, numbers.Integral) or shuffle_seed < 0:
            raise ValueError(f'Invalid shuffle_seed: {shuffle_seed!r}. It must be a non-negative integer.')
        get_registry('shuffle').get(shuffle_algo)
        get_registry('batching').get(batching_method)
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                       or batch_size < 1):
            raise ValueError(f'`batch_size` must be a positive integer (the per-device batch size), got '
                             f'{batch_size!r}.')
        if num_canonical_nodes is not None and (isinstance(num_canonical_nodes, bool) or not isinstance(
                num_canonical_nodes, numbers.Integral) or num_canonical_nodes < 1):
            raise ValueError(f'`num_canonical_nodes` must be a positive integer, got {num_canonical_nodes!r}.')
        if shuffle_block_size is not None and (not isinstance(shuffle_block_size, numbers.Integral)
                                               or shuffle_block_size < 1):
            raise ValueError(f'`shuffle_block_size` must be a positive integer, got {shuffle_block_size!r}.')
        if predownload is not None and (not isinstance(predownload, numbers.Integral) or predownload < 0):
            raise ValueError(f'`predownload` must be a non-negative integer, got {predownload!r}.')
        if replication is not None and (isinstance(replication, bool) or not isinstance(replication, numbers.Integral)
                                        or replication <= 0):
            raise ValueError(f'Replication factor must be positive. Got {replication!r}.')
        if world is not None and not isinstance(world, World):
            raise TypeError(f'`world` must be a streaming_core.World, got {type(world).__name__}.')
        if on_bad_sample not in ('raise', 'replace'):
            raise ValueError(f"`on_bad_sample` must be 'raise' or 'replace', got {on_bad_sample!r}.")
        self.on_bad_sample = on_bad_sample
        if stream_name != 'stream':
            raise ValueError(f'Unknown stream_name {stream_name!r}: pass Stream objects (or subclasses) in `streams`.')

        self.split = split
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        self.sampling_method = sampling_method
        self.sampling_granularity = int(sampling_granularity)
        self.partition_algo = partition_algo
        self.num_canonical_nodes = int(num_canonical_nodes) if num_canonical_nodes is not None else None
        self.batch_size = int(batch_size) if batch_size is not None else None
        self.shuffle = bool(shuffle)
        self.shuffle_algo = shuffle_algo
        self.shuffle_seed = int(shuffle_seed)
        self.shuffle_block_size = int(shuffle_block_size) if shuffle_block_size is not None else None
        self.batching_method = batching_method
        self.allow_unsafe_types = bool(allow_unsafe_types)
        self.replication = replication
        self.predownload = predownload if predownload is not None else (
            8 * self.batch_size if self.batch_size is not None else 64)
        if self.batch_size is not None and self.predownload < self.batch_size:
            warnings.warn(f'predownload ({self.predownload}) < batch_size ({self.batch_size}): the training loop '
                          f'may wait for downloads.', stacklevel=2)
        self._explicit_world = world
        self._world_snapshot: World | None = None
        self.initial_physical_nodes: int | None = None
        self.epoch_seed_change = self.shuffle and self.sampling_method == 'balanced'

        if epoch_size is None or epoch_size == 0 or epoch_size == '':
            parsed_epoch_size = None
        else:
            parsed_epoch_size = number_abbrev_to_int(epoch_size)
            if parsed_epoch_size < 0:
                raise ValueError(f'Epoch size cannot be negative. Received {epoch_size}.')
            parsed_epoch_size = parsed_epoch_size or None

        # Streams and their indexes.
        if streams:
            self.streams = list(streams)
            for stream in self.streams:
                if not isinstance(stream, Stream):
                    raise TypeError(f'`streams` must hold Stream objects, got {type(stream).__name__}.')
        else:
            self.streams = [Stream(remote=remote, local=local, **dict(stream_config or {}))]
        defaults = {'split': split, 'download_retry': download_retry, 'download_timeout': download_timeout,
                    'validate_hash': validate_hash, 'keep_zip': keep_zip, 'storage_options': storage_options}
        for stream in self.streams:
            stream.apply_default(defaults)
        self.num_streams = len(self.streams)
        readers = []
        for stream in self.streams:
            with gc_paused():  # thousands of small reader objects: collections would only walk them
                shards = stream.get_shards(self.allow_unsafe_types)
            if sum(reader.samples for reader in shards) == 0:
                raise EmptyDatasetError(f'Stream contains no samples: {stream.index_path()}.')
            readers.append(shards)
        self.shards = [reader for per in readers for reader in per]
        self.num_shards = len(self.shards)
        self.shards_per_stream = np.array([len(per) for per in readers], dtype=np.int64)
        self.shard_offset_per_stream = np.concatenate([[0], np.cumsum(self.shards_per_stream)[:-1]]).astype(np.int64)
        self.stream_per_shard = np.repeat(np.arange(self.num_streams, dtype=np.int64), self.shards_per_stream)
        self.samples_per_shard = np.array([reader.samples for reader in self.shards], dtype=np.int64)
        self.sample_offset_per_shard = np.concatenate([[0], np.cumsum(self.samples_per_shard)[:-1]]).astype(np.int64)
        self.samples_per_stream = np.array([sum(r.samples for r in per) for per in readers], dtype=np.int64)
        self.sample_offset_per_stream = np.concatenate([[0], np.cumsum(self.samples_per_stream)[:-1]]).astype(np.int64)
        self.num_samples = int(self.samples_per_shard.sum())
        self._shard_ends = np.cumsum(self.samples_per_shard).tolist()
        self.spanner = Spanner(self.samples_per_shard)

        # Cache limit.
        self.cache_limit = bytes_to_int(cache_limit) if cache_limit else None
        if self.cache_limit is not None:
            self._check_cache_limit()

        # Weights.
        choose, proportion, repeat, total = apply_weights(
            [s.proportion for s in self.streams], [s.repeat for s in self.streams],
            [s.choose for s in self.streams], self.samples_per_stream.tolist(), parsed_epoch_size, self.shuffle_seed)
        for stream, c, p, r in zip(self.streams, choose, proportion, repeat):
            stream.choose, stream.proportion, stream.repeat = int(c), float(p), float(r)
        self.epoch_size = int(total)

        self._index_bytes = sum(_file_size(stream.index_path()) for stream in self.streams)
        shard_budget = None if self.cache_limit is None else self.cache_limit - self._index_bytes
        self._shards_manager = ShardManager(self.streams, readers, shard_budget, max_open=max_open_shards)
        self._state = SharedState()
        self._fast_getitem = type(self).__getitem__ is StreamingDataset.__getitem__

    # ----------------------------------------------------------------------------------------------------------
    def _check_cache_limit(self) -> None:
        limit = int(self.cache_limit)
        index_bytes = sum(_file_size(stream.index_path()) for stream in self.streams)
        if limit <= index_bytes:
            raise CacheLimitError(f'Minimum cache usage ({index_bytes} bytes) is larger than the cache limit '
                                  f'({limit} bytes). Please increase the `cache_limit`.')
        largest = max(reader.max_size for reader in self.shards)
        pinned = sum(reader.max_size for reader, stream in zip(self.shards, self.stream_per_shard.tolist())
                     if not self.streams[stream].has_remote_copy)
        need = index_bytes + pinned + largest
        if limit < need:
            raise CacheLimitError(
                f'Cache limit ({limit} bytes) is too low: it must be at least {need} bytes (the index files '
                f'{index_bytes} + local-only shards that are never evicted {pinned} + the largest shard {largest}). '
                f'Four times the largest shard or more avoids re-downloads.')
        if limit < index_bytes + pinned + 4 * largest:
            warnings.warn(f'cache_limit {limit} is below four times the largest shard ({largest} bytes): shards may '
                          f'be evicted and downloaded again while the epoch needs them.', stacklevel=3)

    # ----------------------------------------------------------------------------------------------------------
    # World, epochs and planning.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if state.get('_explicit_world') is None:
            snapshot = World.from_torch_distributed()
            if snapshot is not None:
                state['_world_snapshot'] = snapshot
        return state

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
        resume = self._state.read_resume()
        if resume is not None:
            self._adopt(resume)
        if self.num_canonical_nodes is None:
            self.num_canonical_nodes = default_num_canonical_nodes(self.shuffle_algo, parallel.num_nodes)
        if self.shuffle_block_size is None:
            self.shuffle_block_size = default_shuffle_block_size(self.num_canonical_nodes)

    def _adopt(self, resume: Mapping[str, Any]) -> None:
        self.num_canonical_nodes = int(resume['num_canonical_nodes'])
        self.shuffle_seed = int(resume['shuffle_seed'])
        if resume.get('initial_physical_nodes') is not None:
            self.initial_physical_nodes = int(resume['initial_physical_nodes'])

    def _planner(self) -> EpochPlanner:
        return EpochPlanner(
            samples_per_shard=self.samples_per_shard, shards_per_stream=self.shards_per_stream,
            choose_per_stream=np.array([s.choose for s in self.streams], dtype=np.int64),
            proportion_per_stream=np.array([s.proportion for s in self.streams], dtype=np.float64),
            epoch_size=self.epoch_size, batch_size=self._batch_size(), num_canonical_nodes=self.num_canonical_nodes,
            shuffle=self.shuffle, shuffle_algo=self.shuffle_algo, shuffle_seed=self.shuffle_seed,
            shuffle_block_size=self.shuffle_block_size, partition_algo=self.partition_algo,
            batching_method=self.batching_method, sampling_method=self.sampling_method,
            sampling_granularity=self.sampling_granularity, initial_physical_nodes=self.initial_physical_nodes)

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

    def _start_epoch(self, slot: int) -> tuple[int, int]:
        presumed = self._state.epochs_started(slot)
        resume = self._state.read_resume()
        if resume is not None and int(resume['epoch']) >= presumed:
            epoch, sample_in_epoch = int(resume['epoch']), int(resume['sample_in_epoch'])
        else:
            epoch, sample_in_epoch = presumed, 0
        self._state.set_epochs_started(slot, epoch + 1)
        return epoch, sample_in_epoch

    def _worker_sample_ids(self, world: World) -> tuple[int, NDArray[np.int64]]:
        """Start this worker's next epoch: ``(epoch, this worker's sample ids in order)``."""
        from streaming_core.plans import node_plan
        parallel = world.replicate(self.replication)
        self._resolve_order_defaults(parallel)
        epoch, sample_in_epoch = self._start_epoch(world.worker)
        plan = node_plan(self._planner(), parallel, epoch, sample_in_epoch, parallel.node)
        ids = np.asarray(plan[parallel.rank_of_node, parallel.worker]).reshape(-1)
        return epoch, ids[ids >= 0].astype(np.int64, copy=True)

    def __iter__(self) -> Iterator[Any]:
        """Iterate over this rank's (and DataLoader worker's) samples of the next epoch."""
        from streaming_core.iteration import EpochIterator
        world = self._worker_world()
        epoch, ids = self._worker_sample_ids(world)
        ahead = (lambda: self._plan_ahead(world, epoch + 1)) if self.epoch_size >= PLAN_AHEAD_MIN else None
        with gc_paused():
            iterator = EpochIterator(self, ids, epoch, on_prefetched=ahead)
        return iter(iterator)

    def _plan_ahead(self, world: World, epoch: int) -> None:
        """Compute (and share on the node) the next epoch's plan while this one finishes."""
        from streaming_core.plans import node_plan
        try:
            resume = self._state.read_resume()
            if resume is not None and int(resume['epoch']) >= epoch:
                return  # a resume state decides the next epoch's start
            parallel = world.replicate(self.replication)
            node_plan(self._planner(), parallel, epoch, 0, parallel.node)
        except Exception as err:  # only an optimisation: the next epoch computes it itself
            logger.debug('planning epoch %d ahead failed: %s', epoch, err)

    # ----------------------------------------------------------------------------------------------------------
    # Resumption.
    def state_dict(self, num_samples: int, from_beginning: bool) -> dict[str, Any]:
        """The resumption state after ``num_samples`` samples (global, all ranks) of the current epoch.

        Args:
            num_samples: Samples consumed by the whole world in the current epoch (or since the resume point).
            from_beginning: True if ``num_samples`` counts from the start of the epoch, False if it counts from the
                point this run resumed at.
        """
        parallel = self._rank_world().replicate(self.replication)
        self._resolve_order_defaults(parallel)
        epoch = self._state.max_epochs_started() - 1
        resume = self._state.read_resume()
        offset = 0
        if resume is not None and int(resume['epoch']) >= epoch:
            epoch, offset = int(resume['epoch']), int(resume['sample_in_epoch'])
        sample_in_epoch = num_samples if from_beginning else offset + num_samples
        initial = self.initial_physical_nodes if self.initial_physical_nodes is not None else parallel.num_nodes
        return {'epoch': epoch, 'sample_in_epoch': int(sample_in_epoch),
                'num_canonical_nodes': int(self.num_canonical_nodes), 'shuffle_seed': int(self.shuffle_seed),
                'initial_physical_nodes': int(initial)}

    def load_state_dict(self, obj: Mapping[str, Any]) -> None:
        """Resume from a state dict (ours or mosaicml-streaming's) at the next iteration, in every worker."""
        if not isinstance(obj, Mapping):
            raise TypeError(f'load_state_dict expects a dict, got {type(obj).__name__}.')
        missing = [key for key in _STATE_KEYS if key not in obj]
        if missing:
            raise ValueError(f'State dict is missing keys {missing}; expected {list(_STATE_KEYS)} '
                             f'(+ initial_physical_nodes).')
        for key in (*_STATE_KEYS, 'initial_physical_nodes'):
            value = obj.get(key)
            if key == 'initial_physical_nodes' and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ValueError(f'State dict field {key!r} must be an integer, got {value!r}.')
        if obj['sample_in_epoch'] < 0 or obj['num_canonical_nodes'] < 1 or obj['shuffle_seed'] < 0:
            raise ValueError(f'State dict has out-of-range values: {dict(obj)}.')
        state = {key: int(obj[key]) for key in _STATE_KEYS}
        if obj.get('initial_physical_nodes') is not None:
            state['initial_physical_nodes'] = int(obj['initial_physical_nodes'])
        self._state.write_resume(state)
        self._adopt(state)

    # ----------------------------------------------------------------------------------------------------------
    # Sizes.
    @property
    def size(self) -> int:
        """The number of underlying samples (ignoring stream weighting)."""
        return self.num_samples

    def __len__(self) -> int:
        """Samples per device per epoch: ``ceil(epoch_size / ranks)`` (the reference's meaning)."""
        parallel = self._rank_world().replicate(self.replication)
        return math.ceil(self.epoch_size / parallel.num_ranks)

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration of this rank would start (before any resume state)."""
        return self._state.max_epochs_started()

    @property
    def cache_usage(self) -> int:
        """Bytes this dataset's cache holds node-wide: the index files plus the shards (counted with a cache limit)."""
        cache = self._shards_manager.cache
        return self._index_bytes + (cache.usage if cache is not None else 0)

    # ----------------------------------------------------------------------------------------------------------
    # Random access.
    def _locate(self, sample_id: int) -> tuple[int, int]:
        shard = bisect.bisect_right(self._shard_ends, sample_id)
        start = self._shard_ends[shard - 1] if shard else 0
        return shard, sample_id - start

    def get_item(self, sample_id: int, retry: int = 7) -> Any:
        """The sample with this global id, downloading its shard if needed (``retry`` is accepted for compatibility;
        preparation already retries downloads)."""
        if not 0 <= sample_id < self.num_samples:
            raise IndexError(f'Invalid sample index {sample_id}: the dataset has {self.num_samples} samples.')
        shard, index = self._locate(sample_id)
        return self._shards_manager.sample(shard, index)

    def __getitem__(self, at: Any) -> Any:
        """NumPy-style indexing: an int (negative counts from the end), a slice, a list or an array of ids."""
        return getitem(at, self.num_samples, self.get_item, self.__getitem__)

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


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
