"""The shard catalogue: every shard of a dataset's streams, in stream order, and where each sample lives.

One object, built once per dataset, owns the streams -> shards -> samples table. The dataset, the map-style
``LocalDataset``, the shard manager and the epoch iterator all read it; nothing else rebuilds any part of it. The
tables are NumPy arrays (global shard ids are positions in stream order), so planning and lookups are vectorised;
they come from each stream's memory-mapped binary index, so nothing per shard is created at construction (a shard's
reader is created when it is first touched) and a pickled catalogue carries only its streams and index identities.

Units that share a file. A shard (a *unit*: what shuffles, partitions and batching see) is usually one file, but a
format may cut a file into several units (a Parquet file's row groups): its registered format object says so with
``units_share_files = True``, and the units naming one file (the same first raw file) must follow each other in
the index. The catalogue records, per unit, the first unit naming its file (:attr:`ShardCatalogue.file_of_shard`):
the shard manager downloads, checks, locks, counts and evicts a file under that unit, once for all of its units.
For formats without the declaration this costs nothing (every unit is its own file) and no name is compared.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator, Sequence, Union, overload

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import EmptyDatasetError, IndexFormatError
from streaming_core.machinery.protocols import ShardReader
from streaming_core.reading.shard_files import (
    file_runs,
    readers_share_files,
    same_file_as_previous,
    same_name_candidates,
    table_shares_files,
)
from streaming_core.reading.shard_table import ShardTable
from streaming_core.reading.spanner import Spanner
from streaming_core.reading.stream import Stream

__all__ = ['ShardCatalogue', 'CatalogueReaders', 'ShardSource', 'CatalogueAttributes', 'no_samples']


def no_samples(stream: Stream) -> EmptyDatasetError:
    """The error for a stream whose index holds no sample, naming its ``index.json``, or for an index derived from
    the files (Parquet, WebDataset) the directory whose files hold no rows."""
    identity = str(getattr(stream, 'index_identity', '') or '')
    if identity.startswith('derived:'):
        from streaming_core.storage.redact import redact_url
        where = redact_url(stream.remote_dir or stream.local_dir)
        return EmptyDatasetError(f'Stream contains no samples: the {identity.split(":")[1]} files of {where} hold '
                                 f'no rows (its index is derived from them; there is no index.json).')
    return EmptyDatasetError(f'Stream contains no samples: {stream.index_path()}.')

#: One stream's shards: its mapped shard table (readers created on first touch) or a sequence of readers.
ShardSource = Union[ShardTable, Sequence[ShardReader]]


#: The most samples a dataset may hold: sample ids, offsets and the planner's arithmetic are int64.
MAX_SAMPLES = 1 << 62


def _total_samples(counts: NDArray[np.int64], where: str) -> int:
    """The exact sum of one stream's per-shard sample counts (an int64 sum would wrap around silently).

    Raises:
        IndexFormatError: the stream holds more than :data:`MAX_SAMPLES` samples (naming ``where``).
    """
    if not len(counts):
        return 0
    total = int(counts.sum())
    if int(counts.max()) > MAX_SAMPLES // len(counts):  # the int64 sum may have wrapped: add exactly
        total = sum(int(c) for c in counts.tolist())
    if total > MAX_SAMPLES:
        raise IndexFormatError(f'{where} records {total} samples, more than {MAX_SAMPLES} (2**62), the most a dataset '
                               f'can address: the index is corrupt.')
    return total


def _offsets(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


class CatalogueReaders(Sequence[ShardReader]):
    """Every shard's reader in global shard order, created on first touch by the stream's shard table."""

    def __init__(self, catalogue: 'ShardCatalogue') -> None:
        self._catalogue = catalogue

    def __len__(self) -> int:
        return self._catalogue.num_shards

    @overload
    def __getitem__(self, shard: int) -> ShardReader: ...

    @overload
    def __getitem__(self, shard: slice) -> list[ShardReader]: ...

    def __getitem__(self, shard: Any) -> ShardReader | list[ShardReader]:
        if isinstance(shard, slice):
            return [self[i] for i in range(*shard.indices(len(self)))]
        shard = int(shard)
        if shard < 0:
            shard += len(self)
        if not 0 <= shard < len(self):
            raise IndexError(f'shard {shard} out of range for {len(self)} shards.')
        cat = self._catalogue
        stream = int(cat.stream_per_shard[shard])
        return cat.sources[stream][shard - int(cat.shard_offset_per_stream[stream])]

    def __iter__(self) -> Iterator[ShardReader]:
        for source in self._catalogue.sources:
            yield from source


class ShardCatalogue:
    """Every shard of ``streams`` (global shard ids in stream order) and the sample id -> ``(shard, row)`` map.

    Args:
        streams: The streams (with their defaults applied).
        readers: Per stream, its shards: a :class:`~streaming_core.reading.shard_table.ShardTable` (what
            :meth:`Stream.shard_table` returns: arrays, readers created on first touch) or any sequence of readers.

    Attributes:
        streams: The streams.
        sources: Per stream, the sequence of its shards' readers given.
        readers: One reader per shard, flat, in global shard order (a lazy sequence: a reader is created when first
            indexed).
        shards_per_stream, shard_offset_per_stream: Shards per stream and the first global shard id of each.
        stream_per_shard: The stream of each shard.
        shard_in_stream: Each shard's position within its stream.
        samples_per_shard, sample_offset_per_shard: Samples per shard and the first global sample id of each.
        samples_per_stream, sample_offset_per_stream: The same per stream.
        num_samples: All samples of all streams.
        file_of_shard: Per unit, the first unit naming the same file (the unit itself unless its format's units
            share files): the key under which the file is downloaded, locked, counted and evicted.
        shares_files: Whether any two units name one file.
    """

    def __init__(self, streams: Sequence[Stream], readers: Sequence[ShardSource]) -> None:
        if len(streams) != len(readers):
            raise ValueError(f'{len(streams)} streams but {len(readers)} reader lists.')
        self.streams = list(streams)
        self.sources: list[ShardSource] = [per if isinstance(per, ShardTable) else list(per) for per in readers]
        self._build_tables()

    def _build_tables(self) -> None:
        # Nothing per shard beyond what the tables need: at 10^6 shards each int64 table is 8 MB per process, so a
        # single stream's counts are the mapped array itself, the offsets and the spanner share one prefix sum, and
        # the per-shard stream ids of a single stream are a zero-stride view.
        self.readers: Sequence[ShardReader] = CatalogueReaders(self)
        counts = [per.samples_per_shard if isinstance(per, ShardTable)
                  else np.array([reader.samples for reader in per], dtype=np.int64) for per in self.sources]
        self.shards_per_stream = np.array([len(per) for per in self.sources], dtype=np.int64)
        self.shard_offset_per_stream = _offsets(self.shards_per_stream)
        total = int(self.shards_per_stream.sum())
        if len(self.streams) == 1:
            self.stream_per_shard = np.broadcast_to(np.int64(0), (total,))
        else:
            self.stream_per_shard = np.repeat(np.arange(len(self.streams), dtype=np.int64), self.shards_per_stream)
        if len(counts) == 1:
            self.samples_per_shard = np.asarray(counts[0]).astype(np.int64, copy=False)
        else:
            self.samples_per_shard = (np.concatenate(counts).astype(np.int64, copy=False) if counts
                                      else np.zeros(0, dtype=np.int64))
        prefix = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(self.samples_per_shard, out=prefix[1:])
        self.sample_offset_per_shard = prefix[:-1]
        self.samples_per_stream = (prefix[self.shard_offset_per_stream + self.shards_per_stream]
                                   - prefix[self.shard_offset_per_stream])
        self.sample_offset_per_stream = _offsets(self.samples_per_stream)
        self.num_samples = int(prefix[-1])
        self._spanner = Spanner(self.samples_per_shard, ends=prefix[1:])
        self._shard_in_stream: NDArray[np.int64] | None = None
        self._file_of: NDArray[np.int64] | None = None
        self._shares_files = False

    @property
    def shard_in_stream(self) -> NDArray[np.int64]:
        """Each shard's position within its stream (computed on first use)."""
        if self._shard_in_stream is None:
            total = int(self.shards_per_stream.sum())
            self._shard_in_stream = (np.arange(total, dtype=np.int64)
                                     - self.shard_offset_per_stream[self.stream_per_shard])
        return self._shard_in_stream

    @property
    def file_of_shard(self) -> NDArray[np.int64]:
        """Per unit, the first unit naming the same file (computed on first use; see the module doc)."""
        if self._file_of is None:
            self._group_files()
        return self._file_of  # type: ignore[return-value]

    @property
    def shares_files(self) -> bool:
        """Whether any two units name one file."""
        if self._file_of is None:
            self._group_files()
        return self._shares_files

    def _group_files(self) -> None:
        """Fill :attr:`file_of_shard` (see the module doc)."""
        leaders = np.arange(self.num_shards, dtype=np.int64)
        shared = False
        for stream, source in enumerate(self.sources):
            if isinstance(source, ShardTable):
                if not table_shares_files(source):
                    continue
                same = same_file_as_previous(source)
            else:
                if not readers_share_files(source):
                    continue
                names = [(reader.parts[0][0].basename, reader.parts[0][0].bytes) for reader in source]
                same = np.array([i > 0 and name == names[i - 1] for i, name in enumerate(names)], dtype=bool)
            runs = file_runs(same)
            self._check_runs(stream, source, runs)
            if not same.any():
                continue
            shared = True
            first = int(self.shard_offset_per_stream[stream])
            leaders[first:first + len(source)] = runs + first
        self._shares_files = shared
        self._file_of = leaders

    def _check_runs(self, stream: int, source: ShardSource, runs: NDArray[np.int64]) -> None:
        """Refuse an index whose units of one file do not follow each other (the file would be counted twice and
        could be evicted under a unit being read)."""
        leaders = np.flatnonzero(runs == np.arange(runs.size))
        table = isinstance(source, ShardTable)
        suspects = same_name_candidates(source, leaders) if table else leaders  # type: ignore[arg-type]
        seen: dict[str, int] = {}
        for unit in suspects.tolist():
            name = source.file_names(unit)[0] if table else source[unit].parts[0][0].basename  # type: ignore[union-attr]
            if name in seen:
                where = source.source if table else self.streams[stream].index_path()  # type: ignore[union-attr]
                raise IndexFormatError(f'{where}: units {seen[name]} and {unit} both name {name}, with other files '
                                       f'between them; the units of one file must follow each other in the index. '
                                       f'Rebuild the index (its format plugin wrote it out of order).')
            seen[name] = unit

    @classmethod
    def load(cls, streams: Sequence[Stream], allow_unsafe_types: bool = False) -> 'ShardCatalogue':
        """Bring every stream's index up to date, map its binary form and build the catalogue.

        Raises:
            EmptyDatasetError: a stream holds no samples (naming its index file).
        """
        tables = []
        total = 0
        for stream in streams:
            table = stream.shard_table(allow_unsafe_types)
            samples = _total_samples(table.samples_per_shard, stream.index_path())
            if samples == 0:
                raise no_samples(stream)
            total += samples
            if total > MAX_SAMPLES:
                raise IndexFormatError(f'The streams up to {stream.index_path()} hold {total} samples together, '
                                       f'more than {MAX_SAMPLES} (2**62), the most a dataset can address.')
            tables.append(table)
        return cls(streams, tables)

    def __getstate__(self) -> dict[str, Any]:
        """The streams and their sources only (a shard table pickles as its index identity): the tables are
        recomputed from the mapped arrays when unpickled."""
        return {'streams': self.streams, 'sources': self.sources}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.streams = state['streams']
        self.sources = state['sources']
        self._build_tables()

    @property
    def max_size_per_shard(self) -> NDArray[np.int64]:
        """The most disk each shard adds at once (raw plus compressed bytes), without creating readers for shard
        tables. A file several units share counts at its first unit only (0 at the others), so sums are disk."""
        parts = [per.max_size_per_shard if isinstance(per, ShardTable)
                 else np.array([reader.max_size for reader in per], dtype=np.int64) for per in self.sources]
        sizes = np.concatenate(parts).astype(np.int64, copy=False) if parts else np.zeros(0, dtype=np.int64)
        if self.shares_files:
            sizes = np.where(self.file_of_shard == np.arange(sizes.size), sizes, 0)
        return sizes

    def units_of_file(self, shard: int) -> range:
        """The units naming the same file as ``shard`` (consecutive ids; just ``shard`` for one-file units)."""
        first = int(self.file_of_shard[shard])
        if not self.shares_files:
            return range(first, first + 1)
        return range(first, int(np.searchsorted(self.file_of_shard, first, 'right')))

    def stream_layout(self, stream: int) -> str:
        """A digest of one stream's shards (names, hashes, sample counts) that tells index versions apart."""
        source = self.sources[stream]
        if isinstance(source, ShardTable):
            return source.layout
        digest = hashlib.blake2b(digest_size=16)
        for reader in source:
            digest.update(reader.parts[0][0].basename.encode('utf-8') + b'\0')
        return digest.hexdigest()

    def basename(self, shard: int) -> str:
        """The name of a shard's first raw file (for messages)."""
        return self.readers[shard].parts[0][0].basename

    # ----------------------------------------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        """The number of shards of all streams."""
        return int(self.stream_per_shard.size)

    @property
    def spanner(self) -> Spanner:
        """The sample id -> ``(shard, row)`` map (the reference's ``Spanner`` interface)."""
        return self._spanner

    def locate(self, sample_id: int) -> tuple[int, int]:
        """``(global shard id, row within the shard)`` of one global sample id.

        Raises:
            IndexError: the id is out of range.
        """
        return self._spanner[sample_id]

    def locate_many(self, sample_ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Vectorised :meth:`locate` (ids must be in range): ``(shard ids, rows)``."""
        return self._spanner.locate(sample_ids)

    def stream_of(self, shard: int) -> Stream:
        """The stream a shard belongs to."""
        return self.streams[int(self.stream_per_shard[shard])]

    def layout_identity(self) -> str:
        """A digest of every stream's shards and their sample counts: what a position in the sample order depends
        on (the same on every machine, unlike the index files' stat identity)."""
        digest = hashlib.blake2b(digest_size=8)
        digest.update(self.shards_per_stream.tobytes())
        digest.update(self.samples_per_shard.tobytes())
        return digest.hexdigest()


class CatalogueAttributes:
    """The catalogue's tables under the reference's attribute names, for a class with a ``catalogue``
    (:class:`ShardCatalogue`): ``StreamingDataset`` is one."""

    catalogue: ShardCatalogue

    @property
    def shards(self) -> Sequence[ShardReader]:
        """One reader per shard, in global shard order (a lazy sequence: a reader is created when first indexed)."""
        return self.catalogue.readers

    @property
    def num_shards(self) -> int:
        """The number of shards of all streams."""
        return self.catalogue.num_shards

    @property
    def shards_per_stream(self) -> NDArray[np.int64]:
        """Shards per stream."""
        return self.catalogue.shards_per_stream

    @property
    def shard_offset_per_stream(self) -> NDArray[np.int64]:
        """The first global shard id of each stream."""
        return self.catalogue.shard_offset_per_stream

    @property
    def stream_per_shard(self) -> NDArray[np.int64]:
        """The stream of each shard."""
        return self.catalogue.stream_per_shard

    @property
    def samples_per_shard(self) -> NDArray[np.int64]:
        """Samples per shard."""
        return self.catalogue.samples_per_shard

    @property
    def sample_offset_per_shard(self) -> NDArray[np.int64]:
        """The first global sample id of each shard."""
        return self.catalogue.sample_offset_per_shard

    @property
    def samples_per_stream(self) -> NDArray[np.int64]:
        """Samples per stream."""
        return self.catalogue.samples_per_stream

    @property
    def sample_offset_per_stream(self) -> NDArray[np.int64]:
        """The first global sample id of each stream."""
        return self.catalogue.sample_offset_per_stream

    @property
    def num_samples(self) -> int:
        """The number of underlying samples."""
        return self.catalogue.num_samples

    @property
    def spanner(self) -> Spanner:
        """The sample id -> ``(shard, row)`` map."""
        return self.catalogue.spanner
