"""The inputs of a simulation: the dataset's shape (shard sizes) and the training run's shape.

A :class:`DatasetShape` is either synthetic (``samples``, ``shard_samples``, ``sample_bytes``) or read from a real
``index.json`` (local or remote; only the index is fetched; streamed into compact arrays, never one object per
shard). A :class:`TrainingShape` holds the world, the batch,
the order arguments and the cache/network model, validated the way :class:`~streaming_core.StreamingDataset`
validates them, with the library's defaults resolved.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.common.arguments import bytes_to_int
from streaming_core.errors import CacheLimitError
from streaming_core.ordering.planner import default_num_canonical_nodes, default_shuffle_block_size

__all__ = ['DatasetShape', 'TrainingShape', 'NO_SHUFFLE']

#: The pseudo shuffle algorithm name for ``shuffle=False``.
NO_SHUFFLE = 'none'


@dataclass
class DatasetShape:
    """Shard sizes of one stream.

    Attributes:
        samples_per_shard: Samples in each shard.
        raw_bytes: Bytes each shard occupies in the cache once prepared (its raw files).
        download_bytes: Bytes downloaded per shard (the compressed files when compressed, else the raw ones).
        index_bytes: Size of ``index.json`` (counted in the cache, as the library does).
        source: Where the shape came from (for reports).
    """

    samples_per_shard: NDArray[np.int64]
    raw_bytes: NDArray[np.int64]
    download_bytes: NDArray[np.int64]
    index_bytes: int = 0
    source: str = 'synthetic'

    def __post_init__(self) -> None:
        self.samples_per_shard = np.asarray(self.samples_per_shard, np.int64)
        self.raw_bytes = np.asarray(self.raw_bytes, np.int64)
        self.download_bytes = np.asarray(self.download_bytes, np.int64)
        if not len(self.samples_per_shard) or int(self.samples_per_shard.sum()) <= 0:
            raise ValueError('The dataset has no samples; a simulation needs at least one.')
        if not len(self.samples_per_shard) == len(self.raw_bytes) == len(self.download_bytes):
            raise ValueError('samples_per_shard, raw_bytes and download_bytes need one entry per shard.')

    @property
    def num_samples(self) -> int:
        """Total samples."""
        return int(self.samples_per_shard.sum())

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return len(self.samples_per_shard)

    @property
    def shard_ends(self) -> NDArray[np.int64]:
        """Cumulative sample counts (the first sample id of the next shard)."""
        return np.cumsum(self.samples_per_shard)

    @classmethod
    def synthetic(cls, samples: int, shard_samples: int, sample_bytes: int) -> 'DatasetShape':
        """``samples`` samples of ``sample_bytes`` bytes in shards of ``shard_samples`` (the last one shorter)."""
        for name, value in (('samples', samples), ('shard_samples', shard_samples), ('sample_bytes', sample_bytes)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f'--{name.replace("_", "-")} must be a positive integer, got {value!r}.')
        full, rest = divmod(int(samples), int(shard_samples))
        sizes = np.full(full + (1 if rest else 0), int(shard_samples), np.int64)
        if rest:
            sizes[-1] = rest
        raw = sizes * int(sample_bytes)
        return cls(sizes, raw, raw.copy(), 0, f'synthetic: {samples} samples, {shard_samples} per shard, '
                                               f'{sample_bytes} B each')

    @classmethod
    def from_index(cls, index: Mapping[str, Any], location: str, index_bytes: int = 0) -> 'DatasetShape':
        """The shape of a parsed ``index.json`` (shard entries validated by their format plugins)."""
        from streaming_core.reading.index_file import shard_readers
        readers = shard_readers(index, location)
        if not readers:
            raise ValueError(f'{location} lists no shards.')
        samples = [reader.samples for reader in readers]
        raw = [reader.raw_bytes for reader in readers]
        down = [reader.zip_bytes if reader.compression else reader.raw_bytes for reader in readers]
        return cls(np.array(samples), np.array(raw), np.array(down), index_bytes, location)

    @classmethod
    def from_file(cls, path: str, location: str) -> 'DatasetShape':
        """The shape of the ``index.json`` at ``path``, streamed into the binary index form
        (:mod:`streaming_core.reading.binary_index`): no Python object per shard, so indexes of millions of shards fit
        in bounded memory. Each shard template is validated by its format plugin, and the per-shard limits it states
        are checked vectorised, as a dataset does.

        Raises:
            IndexFormatError: the index is invalid (naming ``location`` and the shard).
            ValueError: it lists no shards.
        """
        from types import SimpleNamespace

        from streaming_core.reading.binary_index import build_binary, open_binary, write_binary
        from streaming_core.reading.index_file_stream import iter_index_entries
        from streaming_core.reading.shard_table import ShardTable
        with tempfile.TemporaryDirectory(prefix='streaming-simulate-') as scratch:
            with open(path, 'rb') as handle:
                header, columns = build_binary(iter_index_entries(handle, location), location, 'simulate',
                                               spill_dir=scratch)
                index_bytes = os.fstat(handle.fileno()).st_size
            binary = os.path.join(scratch, 'index.bin')
            try:
                write_binary(binary, header, columns)
            finally:
                for column in columns.values():
                    column.close()
            if not header['num_shards']:
                raise ValueError(f'{location} lists no shards.')
            header, arrays, mapping = open_binary(binary, 'simulate')
            try:
                table = ShardTable(SimpleNamespace(local_dir=scratch), binary, header, arrays, mapping, False)
                compressed = np.array([bool(t['entry'].get('compression')) for t in header['templates']])
                samples = np.array(table.samples_per_shard, np.int64)
                raw = np.array(arrays['raw_bytes'], np.int64)
                down = np.where(compressed[arrays['template']], arrays['zip_bytes'], arrays['raw_bytes'])
                down = np.array(down, np.int64)
                del table, arrays
            finally:
                mapping.close()
        return cls(samples, raw, down, index_bytes, location)

    @classmethod
    def from_location(cls, where: str, split: str | None = None,
                      storage_options: Mapping[str, Any] | None = None) -> 'DatasetShape':
        """The shape of the dataset at a directory, an ``index.json`` path, or a remote URL of either (the index
        is streamed: see :meth:`from_file`)."""
        from streaming_core.reading.index_file import INDEX_BASENAME
        from streaming_core.storage.facade import download_file, is_remote, join, local_path
        from streaming_core.storage.redact import redact_url
        root = where.rstrip('/')
        if root.endswith(INDEX_BASENAME):
            root = root[:-len(INDEX_BASENAME)].rstrip('/') or '.'
        if split:
            root = join(root, split)
        if is_remote(root):
            url = join(root, INDEX_BASENAME)
            with tempfile.TemporaryDirectory(prefix='streaming-simulate-') as scratch:
                path = os.path.join(scratch, INDEX_BASENAME)
                download_file(url, path, options=storage_options)
                return cls.from_file(path, redact_url(url))  # the location is for messages
        path = os.path.join(local_path(root), INDEX_BASENAME)
        if not os.path.isfile(path):
            raise FileNotFoundError(f'No index at {path}: give --index a dataset directory, its index.json or a '
                                    f'remote URL.')
        return cls.from_file(path, path)


def _positive(name: str, value: Any, allow_zero: bool = False) -> None:
    bad = isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
    if bad or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f'{name} must be a {"non-negative" if allow_zero else "positive"} number, got {value!r}.')


@dataclass
class TrainingShape:
    """The training run to simulate.

    Args:
        nodes: Physical nodes.
        ranks_per_node: Ranks (devices) per node.
        workers: DataLoader workers per rank.
        batch_size: Per-device batch size.
        shuffle_algos: Shuffle algorithm names to compare (``'none'`` for no shuffle).
        shuffle_block_size: The block size (default: the library's, from NCN).
        num_canonical_nodes: NCN (default: the library's, per algorithm).
        shuffle_seed: The seed.
        partition_algo: ``'relaxed'`` (default) or ``'orig'``.
        epochs: Epochs to run.
        cache_limit: Node cache limit in bytes (or ``'100gb'``), None for unlimited.
        bandwidth: Download bytes per second per node (or ``'1gb'``).
        time_per_sample: Seconds a device spends per sample (the model's step time / batch size).
        predownload: Samples each worker prepares ahead (default ``8 * batch_size``, as the library).
    """

    nodes: int = 1
    ranks_per_node: int = 8
    workers: int = 8
    batch_size: int = 32
    shuffle_algos: Sequence[str] = ('py1e',)
    shuffle_block_size: int | None = None
    num_canonical_nodes: int | None = None
    shuffle_seed: int = 9176
    partition_algo: str = 'relaxed'
    epochs: int = 1
    cache_limit: int | str | None = None
    bandwidth: int | float | str = '500mb'
    time_per_sample: float = 0.001
    predownload: int | None = None

    def __post_init__(self) -> None:
        for name in ('nodes', 'ranks_per_node', 'workers', 'batch_size', 'epochs'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f'{name} must be a positive integer, got {value!r}.')
        if isinstance(self.shuffle_algos, str):
            self.shuffle_algos = [a.strip() for a in self.shuffle_algos.split(',') if a.strip()]
        self.shuffle_algos = list(dict.fromkeys(self.shuffle_algos))
        if not self.shuffle_algos:
            raise ValueError('Give at least one shuffle algorithm (or "none").')
        from streaming_core.machinery.lookup import get_registry
        for algo in self.shuffle_algos:
            if algo != NO_SHUFFLE:
                get_registry('shuffle').get(algo)
        if self.partition_algo not in ('orig', 'relaxed'):
            raise ValueError(f"partition_algo must be 'orig' or 'relaxed', got {self.partition_algo!r}.")
        self.bandwidth = float(bytes_to_int(self.bandwidth)) if isinstance(self.bandwidth, str) \
            else float(self.bandwidth)
        _positive('bandwidth', self.bandwidth)
        _positive('time_per_sample', self.time_per_sample, allow_zero=True)
        if isinstance(self.cache_limit, (np.integer, np.floating)):
            self.cache_limit = int(self.cache_limit)
        if self.cache_limit is not None:
            self.cache_limit = bytes_to_int(self.cache_limit) or None
        if self.predownload is None:
            self.predownload = 8 * int(self.batch_size)
        _positive('predownload', self.predownload, allow_zero=True)
        for name in ('shuffle_block_size', 'num_canonical_nodes'):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value < 1):
                raise ValueError(f'{name} must be a positive integer, got {value!r}.')

    @property
    def devices(self) -> int:
        """Ranks in the world."""
        return self.nodes * self.ranks_per_node

    @property
    def step_seconds(self) -> float:
        """Compute time of one step (all devices in parallel)."""
        return float(self.batch_size) * float(self.time_per_sample)

    @property
    def lookahead_steps(self) -> int:
        """Steps ahead a shard is requested: each worker prepares ``predownload`` samples of its own batches, and
        workers take turns, so that is ``predownload // batch_size`` of its batches, ``workers`` steps apart."""
        return int(self.predownload) // int(self.batch_size) * int(self.workers)

    def ncn(self, algo: str) -> int:
        """NCN for an algorithm (given, or the library's default)."""
        if self.num_canonical_nodes is not None:
            return int(self.num_canonical_nodes)
        return default_num_canonical_nodes('py1e' if algo == NO_SHUFFLE else algo, self.nodes)

    def block_size(self, algo: str) -> int:
        """The shuffle block size for an algorithm (given, or the library's default)."""
        if self.shuffle_block_size is not None:
            return int(self.shuffle_block_size)
        return default_shuffle_block_size(self.ncn(algo))

    def check_cache(self, dataset: DatasetShape) -> list[str]:
        """Validate ``cache_limit`` against the dataset as the library does; returns warnings.

        Raises:
            CacheLimitError: the limit cannot hold the index plus the largest shard.
        """
        if self.cache_limit is None:
            return []
        largest = int((dataset.raw_bytes + np.where(dataset.download_bytes != dataset.raw_bytes,
                                                    dataset.download_bytes, 0)).max())
        need = dataset.index_bytes + largest
        if int(self.cache_limit) < need:
            raise CacheLimitError(f'Cache limit ({self.cache_limit} bytes) is too low: it must hold the index '
                                  f'({dataset.index_bytes} bytes) and the largest shard ({largest} bytes), at least '
                                  f'{need} bytes.')
        if int(self.cache_limit) < dataset.index_bytes + 4 * largest:
            return [f'cache_limit is below four times the largest shard ({largest} bytes): expect re-downloads.']
        return []
