"""The protocols plugin implementations satisfy, one per registry kind.

These are structural (``typing.Protocol``): an implementation does not need to inherit from them. See
:mod:`streaming_core.hookspecs` for how each is registered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from streaming_core.ordering.planner import EpochPlanner
    from streaming_core.ordering.world import World

__all__ = ['Codec', 'CodecFactory', 'Compressor', 'Hasher', 'StorageBackend', 'StorageBackendFactory',
           'ShardFormat', 'ShardReader', 'ShardView', 'ShuffleAlgorithm', 'BatchingMethod', 'IndexBuilder']


@runtime_checkable
class Codec(Protocol):
    """An MDS column encoding: turns one column value into bytes and back.

    Attributes:
        size: The fixed encoded size in bytes, or ``None`` when it varies (the MDS sample head then stores the
            length). Never 0.
        unsafe: True when decoding can execute code (``pkl``); such columns are refused on read unless the
            dataset has ``allow_unsafe_types=True``.
    """

    size: int | None
    unsafe: bool

    def encode(self, obj: Any) -> bytes:
        """Encode one value. Raise ``CodecError`` (or ``TypeError``/``ValueError``) for a value it cannot take."""
        ...

    def decode(self, data: bytes | memoryview) -> Any:
        """Decode one value from exactly the bytes :meth:`encode` produced."""
        ...


#: What a codec registration is: ``factory(args)`` where ``args`` is the text after the first ``:`` or None.
CodecFactory = Callable[[str | None], Codec]


@runtime_checkable
class Compressor(Protocol):
    """A compression family.

    Attributes:
        extension: The family name, used as the compressed file's extension.
        levels: The valid levels (empty when the family takes none, like ``snappy``).
        default_level: The level used for a bare family name (``None`` when there are no levels).

    A compressor may also define ``decompress_to(src, dst, max_size=None) -> int``, decompressing the open file
    ``src`` into ``dst`` a chunk at a time (bounded by ``max_size``, returning the bytes written): the core then
    decompresses downloaded shards in bounded memory (gzip and bzip2 do); without it, the file is decompressed in
    memory through :meth:`decompress`.
    """

    extension: str
    levels: Sequence[int]
    default_level: int | None

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress ``data`` at ``level`` (already validated against :attr:`levels`)."""
        ...

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress ``data``. When ``max_size`` is given, never produce (or allocate) more than ``max_size`` bytes:
        raise ``ShardCorruptError`` instead, so a hostile file cannot expand without bound."""
        ...


class Hasher(Protocol):
    """A hash algorithm: ``hasher(data) -> lowercase hex digest`` for a bytes-like object."""

    def __call__(self, data: bytes | memoryview) -> str:
        """Return the hex digest of ``data``."""
        ...


@runtime_checkable
class StorageBackend(Protocol):
    """Access to one URL scheme. One instance per process and option set; it may hold a client.

    Contract: every request honours ``timeout`` (seconds). A missing object raises ``FileNotFoundError`` (or
    :class:`~streaming_core.errors.RemoteNotFoundError`) naming the URL, and is never retried. Any other
    exception is treated as transient and retried by the core with backoff and jitter, unless it is a
    :class:`~streaming_core.errors.PermanentStorageError`. Never put credentials in exception messages.

    Optional methods the core uses when a backend has them (it falls back otherwise):

    * ``read_range(url, start, length, *, timeout) -> bytes``: ``length`` bytes from byte ``start`` in one ranged
      request (fewer at the end of the object, ``b''`` past it). Index builders read file footers with it
      (:func:`streaming_core.storage.facade.read_range`); without it the whole object is downloaded and sliced.
    * ``stat(url, *, timeout) -> Mapping``: ``etag`` / ``size`` / ``mtime`` of one object without reading it
      (:func:`streaming_core.storage.facade.stat_object`); a missing object raises as above. Together they must
      change whenever the object is written again, even with the same bytes: a dataset rewritten with an identical
      ``index.json`` is noticed only this way (without ``stat``, or with neither ``etag`` nor ``mtime``, it is not).
    * ``list_stats(url, *, timeout) -> list[(url, Mapping)]``: :meth:`list` with each object's ``etag`` / ``size`` /
      ``mtime`` (:func:`streaming_core.storage.facade.list_with_stats`); without it, :meth:`list` then ``stat`` per
      object.
    * ``pinned_url(url, *, timeout) -> str``: a URL naming the version of ``url`` that reads give now and always
      will (``hf://…/name/x`` -> ``hf://…/name@<commit>/x``): a stream downloads its files from its remote pinned so
      when its index is loaded, and carries that URL when it is pickled
      (:func:`streaming_core.storage.facade.pinned_location`); without it the URL is read as it is.
    * ``reset()``: drop clients between retries.
    """

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Write the object at ``url`` to the local file ``path`` (the core passes a unique temporary name and
        renames it into place after checking the size)."""
        ...

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload the local file ``path`` to ``url``, overwriting it."""
        ...

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether an object exists at ``url``."""
        ...

    def list(self, url: str, *, timeout: float) -> list[str]:
        """The full URLs of the objects whose URL starts with ``url`` (a prefix), sorted."""
        ...


#: What a storage registration is: ``factory(**options) -> StorageBackend``.
StorageBackendFactory = Callable[..., StorageBackend]


class ShardView(Protocol):
    """An opened, local shard: random access to decoded samples (memory-mapped, no syscall per sample)."""

    def __len__(self) -> int:
        """The number of samples."""
        ...

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Decode sample ``index`` (0-based within the shard)."""
        ...

    def close(self) -> None:
        """Release the mapping and file handles."""
        ...


class ShardReader(Protocol):
    """One shard entry of an index: what to fetch and how to open it. Cheap to pickle.

    The core types every reader with this Protocol (the catalogue, the shard manager, the iterator) and reads only
    what it declares; it never attaches attributes to a reader.
    :class:`~streaming_core.reading.shard_entry.ShardReaderBase` provides all of it from the index entry.

    Attributes:
        samples: The number of samples.
        parts: ``(raw FileInfo, zip FileInfo or None)`` per file of the shard (data, then meta for split formats).
        compression: The compression string of the entry (``'zstd:7'``) or None.
        where: Where the entry comes from (index file and shard), for messages.

    A reader may also offer ``read_sample(paths, index) -> dict`` (one sample by a positioned read, without
    opening the shard); the shard manager uses it for a shard's first random access. And ``format_name``, the name
    of its shard format: for readers a stream lists itself (its own ``get_shards``), the catalogue groups units
    naming one file only when that format declares ``units_share_files``; without it, no unit shares a file.
    """

    samples: int
    parts: Sequence[tuple[Any, Any]]
    compression: str | None
    where: str

    @property
    def max_size(self) -> int:
        """The most disk the shard occupies at once: its raw plus compressed bytes (for the cache limit)."""
        ...

    def open(self, paths: Sequence[str]) -> ShardView:
        """Open the shard from the local raw files (``paths`` follows :attr:`parts`). Raises ``ShardCorruptError``
        naming the file when its header disagrees with the entry."""
        ...


@runtime_checkable
class ShardFormat(Protocol):
    """A shard format, registered under the ``format`` name that index entries carry.

    Attributes:
        name: The format name (``'mds'``, ``'json'``...).
        writer: The writer class (a :class:`~streaming_core.writing.writer.ShardWriter` subclass taking
            ``columns``, ``out``, ``compression``, ``hashes``, ``size_limit`` and the other writer keyword
            arguments), so converters and the CLI can write any format by name.

    A format that takes *format options* for a streaming ``index.json`` (``Stream(columns=[...])``) declares their
    names in ``option_names`` and returns, from ``configure(options) -> ShardFormat``, the format whose readers honour
    them (``ValueError`` for a bad value); such a reader raises ``ValueError`` naming the shard's columns for a
    column its entry lacks. The core checks the names and reports both errors as ``FormatOptionError`` at
    construction (:mod:`streaming_core.reading.format_options`); a format without ``option_names`` takes none.

    Optional attributes: ``units_share_files = True`` when several index entries (units, such as a Parquet file's
    row groups) may name one file, which the core then downloads, counts and evicts once; ``unit_word`` (such as
    ``'row group'``) names those units in ``streaming inspect`` and ``streaming verify``.
    """

    name: str

    @property
    def writer(self) -> type:
        """The writer class of this format."""
        ...

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> ShardReader:
        """Validate one index entry (exact key set and types) and return its reader. Raises
        ``IndexFormatError`` (its message starting with ``where``) for a malformed entry and ``UnsafeTypeError``
        for refused column types."""
        ...


@runtime_checkable
class IndexBuilder(Protocol):
    """Builds the index of a directory of files that index themselves (Parquet...), registered under the name
    users pass as ``format=``.

    Attributes:
        name: The format name.
        patterns: ``fnmatch`` patterns of the file names it indexes (``('*.parquet',)``), matched against each
            file's path relative to the directory and its base name.

    Optional: ``index_version``, part of the derived index's identity: raise it when the builder's output changes
    for the same files, so an index kept by an older version is rebuilt. ``sidecar(files, read, *, where) ->
    (name, bytes)`` and ``sidecar_name``: a *sidecar index* that ``streaming index DIR`` writes beside the files
    and ``build`` may use instead of reading every file (include ``sidecar_name`` in ``patterns`` so ``build`` is
    given it); a directory holding only a sidecar is not detected as the format's. ``print_span(path, size) ->
    (start, length)`` (or a list of them): the bytes of a local file that identify its contents (a Parquet file's
    footer), hashed when the index of a local directory is derived and again when the file's stat cannot tell a
    rewrite in place (:mod:`streaming_core.reading.tail_prints`); without it, blocks spread over the file are.
    """

    name: str
    patterns: Sequence[str]

    def build(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *, where: str) -> dict[str, Any]:
        """Return ``{'shards': [...], 'version': 2}`` for ``files``
        (:class:`~streaming_core.reading.derived_index.SourceFile` objects sorted by name), reading their metadata with
        ``read(name, start, length)``. ``where`` names the directory for messages. Must be a pure function of the
        files' contents."""
        ...


class ShuffleAlgorithm(Protocol):
    """``shuffle(shard_sizes, num_canonical_nodes, seed, epoch, block_size) -> int64 permutation``.

    ``shard_sizes`` are the epoch's shuffle units (resampled shards) in (stream, shard, repeat) order. Position
    ``i`` of the result is the (big) sample ID read at canonical position ``i``; canonical node ``c`` owns
    positions ``[c*N//NCN, (c+1)*N//NCN)``.

    An algorithm that can compute one canonical node's share on its own may also provide
    ``node_share(shard_sizes, num_canonical_nodes, seed, epoch, block_size, node) -> int64 array`` (the slice of the
    permutation for that node's positions), or ``nodes_share(shard_sizes, num_canonical_nodes, seed, epoch,
    block_size, nodes, dtype=np.int64) -> {node: array}`` for several nodes at once (preferred when present);
    planning then costs a physical node only what it reads.

    An algorithm declares its properties as boolean attributes; the planner reads them (an absent one is False)
    and never tests a shuffle's name:

    * ``splits_canonical_nodes``: the algorithm shuffles only within each canonical node's share of the shards
      (``py1s``, ``py2s``), so its order improves with more canonical nodes: the default ``num_canonical_nodes`` is
      64 per physical node instead of one.
    * ``spreads_shards_within_block``: the algorithm spreads each shard's samples over a window of about
      ``block_size`` positions (``py1e``, ``py1n``), so a shard larger than the block is shuffled less: the planner
      warns (``Shuffle block size was smaller than shard size ...``) for every plan, computed or cached.

    A plain function declares them as function attributes (``my_shuffle.splits_canonical_nodes = True``).
    """

    def __call__(self, shard_sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                 block_size: int) -> NDArray[np.int64]:
        """Return the permutation."""
        ...


class BatchingMethod(Protocol):
    """``method(planner, world, epoch, sample_in_epoch) -> (nodes, ranks, workers, batches, batch_size)`` int64 array
    of sample IDs (``-1`` for padding) for the whole parallel world."""

    def __call__(self, planner: 'EpochPlanner', world: 'World', epoch: int,
                 sample_in_epoch: int) -> NDArray[np.int64]:
        """Return the epoch's partition."""
        ...
