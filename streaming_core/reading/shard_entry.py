"""Format-independent parts of reading a shard: entry key and type validation, the files it is made of, and the
memory-mapping and offset-table checks every binary layout shares.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from streaming_core.errors import IndexFormatError, ShardCorruptError
from streaming_core.machinery.protocols import ShardReader, ShardView
from streaming_core.reading.index_file import FileInfo

__all__ = ['MAX_SHARD_BYTES', 'SplitShardView', 'ShardReaderBase', 'require_type', 'map_file', 'read_offsets']

#: Shard files index their samples with 32-bit offsets, so a shard must stay below 4 GiB.
MAX_SHARD_BYTES = (1 << 32) - 1
_SMALL_TABLE = 256


def map_file(path: str, expected_size: int | None, minimum: int = 0) -> mmap.mmap | bytes:
    """Memory-map ``path`` read-only after checking its size.

    Args:
        path: The local raw file.
        expected_size: The size the index declares (``raw_*.bytes``); any other size is corruption.
        minimum: The smallest size the layout allows (a header).

    Returns:
        The mapping (or ``b''`` for an empty file, which cannot be mapped).

    Raises:
        ShardCorruptError: naming the file, for a wrong or too small size.
    """
    with open(path, 'rb') as handle:
        size = os.fstat(handle.fileno()).st_size
        if expected_size is not None and size != expected_size:
            raise ShardCorruptError(f'{path}: the file has {size} bytes but the index declares {expected_size} '
                                    f'(truncated or replaced); delete it so it is fetched again.')
        if size < minimum:
            raise ShardCorruptError(f'{path}: the file has {size} bytes, fewer than the {minimum}-byte header of '
                                    f'its format (truncated).')
        if size == 0:
            return b''
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def read_offsets(buf: Any, count: int, offset: int, first_min: int, first_max: int | None, end: int,
                 path: str) -> list[int]:
    """Read and validate a table of ``count + 1`` little-endian ``u32`` offsets at byte ``offset`` of ``buf``.

    The offsets must be non-decreasing, the first must lie in ``[first_min, first_max]`` and the last must equal
    ``end`` (the size of the file they point into). Returns them as Python ints (one copy, so the mapping is not
    pinned by a numpy view).

    Raises:
        ShardCorruptError: naming ``path`` and what is wrong.
    """
    need = offset + 4 * (count + 1)
    if len(buf) < need:
        raise ShardCorruptError(f'{path}: the offset table of {count} samples needs {need} bytes but the file has '
                                f'{len(buf)} (truncated).')
    if count < _SMALL_TABLE:  # struct beats numpy's per-call overhead on short tables
        small = struct.unpack_from(f'<{count + 1}I', buf, offset)
        if small[0] >= first_min and (first_max is None or small[0] <= first_max) and small[-1] == end and all(
                a <= b for a, b in zip(small, small[1:])):
            return list(small)
    table = np.frombuffer(buf, dtype='<u4', count=count + 1, offset=offset).astype(np.int64)
    first, last = int(table[0]), int(table[-1])
    if first < first_min or (first_max is not None and first > first_max):
        want = f'{first_min}' if first_max == first_min else f'at least {first_min}'
        raise ShardCorruptError(f'{path}: the first sample offset is {first}, expected {want} (the end of the '
                                f'header); the shard is corrupt.')
    if count and bool((table[1:] < table[:-1]).any()):
        bad = int(np.argmax(table[1:] < table[:-1]))
        raise ShardCorruptError(f'{path}: sample offsets decrease at sample {bad} ({int(table[bad])} then '
                                f'{int(table[bad + 1])}); the shard is corrupt.')
    if last != end:
        where = 'past the end of' if last > end else 'short of'
        raise ShardCorruptError(f'{path}: the last sample offset is {last}, {where} the data size {end}; the shard '
                                f'is truncated or corrupt.')
    return table.tolist()


def require_type(entry: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str,
                 nullable: bool = False) -> Any:
    """``entry[key]`` after checking its type (``bool`` never counts as ``int``)."""
    value = entry[key]
    if value is None and nullable:
        return None
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in (
        types if isinstance(types, tuple) else (types,)))
    if not ok:
        names = types.__name__ if isinstance(types, type) else ' or '.join(t.__name__ for t in types)
        raise IndexFormatError(f'{where}: "{key}" must be {names}{" or null" if nullable else ""}, got {value!r}.')
    return value


class ShardReaderBase:
    """Validates the keys every format shares and exposes the shard's files.

    Subclasses set :attr:`format_name`, :attr:`entry_keys` (the exact key set of an entry), :attr:`part_names`
    (``('data',)`` for single-file formats, ``('data', 'meta')`` for split ones), parse their own keys in
    :meth:`parse` and implement :meth:`open`.
    """

    format_name: ClassVar[str] = ''
    entry_keys: ClassVar[frozenset[str]] = frozenset()
    part_names: ClassVar[tuple[str, ...]] = ('data',)
    #: Bytes every sample costs at least across the raw files (a 32-bit offset for the first-party formats): an
    #: entry claiming more samples than its files can hold is refused before anything is sized from it.
    min_bytes_per_sample: ClassVar[int] = 0
    #: The largest raw file the format can address (32-bit offsets: just under 4 GiB), or None.
    max_file_bytes: ClassVar[int | None] = None

    def __init__(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> None:
        where = where or f'{self.format_name} shard'
        self.where = where
        if not isinstance(entry, Mapping):
            raise IndexFormatError(f'{where}: a shard entry must be a JSON object, got {type(entry).__name__}.')
        keys = set(entry)
        if not self.entry_keys:
            raise TypeError(f'{type(self).__qualname__} (a ShardReaderBase subclass for the {self.format_name!r} '
                            f'format) sets no entry_keys: set the class attribute entry_keys to the exact keys of '
                            f'its index entries (this entry has {sorted(keys)}).')
        if keys != set(self.entry_keys):
            extra = sorted(keys - self.entry_keys)
            missing = sorted(self.entry_keys - keys)
            raise IndexFormatError(f'{where}: a {self.format_name} shard entry has unexpected keys {extra} and is '
                                   f'missing keys {missing}.')
        version = entry['version']
        if version != 2 or isinstance(version, bool):
            raise IndexFormatError(f'{where}: Unsupported streaming data version: {version!r}. This reader reads '
                                   f'version 2 shard entries.')
        if entry['format'] != self.format_name:
            raise IndexFormatError(f'{where}: format {entry["format"]!r} given to the {self.format_name} reader.')
        samples = require_type(entry, 'samples', int, where)
        if samples < 0:
            raise IndexFormatError(f'{where}: "samples" must not be negative, got {samples}.')
        self.samples: int = samples
        self.compression: str | None = require_type(entry, 'compression', str, where, nullable=True) or None
        hashes = require_type(entry, 'hashes', list, where)
        if not all(isinstance(h, str) for h in hashes):
            raise IndexFormatError(f'{where}: "hashes" must be a list of strings, got {hashes!r}.')
        self.hashes: list[str] = list(hashes)
        self.size_limit = require_type(entry, 'size_limit', (int, str), where, nullable=True)
        parts = []
        for part in self.part_names:
            raw = FileInfo.from_json(entry[f'raw_{part}'], f'{where} raw_{part}')
            zipped_obj = entry[f'zip_{part}']
            zipped = None if zipped_obj is None else FileInfo.from_json(zipped_obj, f'{where} zip_{part}')
            if zipped is not None and self.compression is None:
                raise IndexFormatError(f'{where}: Shard is invalid: compression was not used, but has a compressed '
                                       f'form (zip_{part}).')
            if zipped is None and self.compression is not None:
                raise IndexFormatError(f'{where}: compression {self.compression!r} is set but zip_{part} is null.')
            parts.append((raw, zipped))
        self.parts: list[tuple[FileInfo, FileInfo | None]] = parts
        self._check_sizes(where)
        if self.compression is not None:
            from streaming_core.storage.compression import parse_compression
            try:
                parse_compression(self.compression)
            except ValueError as err:
                raise IndexFormatError(f'{where}: {err}') from err
        self.allow_unsafe_types = allow_unsafe_types
        self.parse(entry, where)

    def _check_sizes(self, where: str) -> None:
        limit = self.max_file_bytes
        for raw, _ in self.parts:
            if limit is not None and raw.bytes > limit:
                raise IndexFormatError(f'{where}: {raw.basename} is declared as {raw.bytes} bytes, more than a '
                                       f'{self.format_name} shard can address ({limit}).')
        total = sum(raw.bytes for raw, _ in self.parts)
        if self.min_bytes_per_sample and self.samples * self.min_bytes_per_sample > total:
            raise IndexFormatError(f'{where}: {self.samples} samples cannot fit in {total} bytes of shard files.')

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate and store the format's own keys (override)."""

    def open(self, paths: Sequence[str]) -> ShardView:
        """Open the shard from its local raw files (override)."""
        raise NotImplementedError

    @property
    def raw_bytes(self) -> int:
        """Total size of the uncompressed files."""
        return sum(raw.bytes for raw, _ in self.parts)

    @property
    def zip_bytes(self) -> int:
        """Total size of the compressed files (0 when uncompressed)."""
        return sum(z.bytes for _, z in self.parts if z is not None)

    @property
    def max_size(self) -> int:
        """The most disk this shard occupies at once (raw plus zip)."""
        return self.raw_bytes + self.zip_bytes

    def __repr__(self) -> str:
        return f'<{type(self).__name__} {self.parts[0][0].basename} samples={self.samples}>'


_U32 = struct.Struct('<I')


class SplitShardView:
    """What the data + meta formats (JSON lines, CSV/TSV/XSV) share once opened: the offset table from the meta file,
    ``len``, ``get_raw`` and closing. Subclasses decode a line in ``__getitem__``.

    Args:
        reader: The shard's reader (``parts`` = data, then meta).
        data_path: The local raw data file.
        meta_path: The local raw meta file.
        first_offset: Where the first sample starts in the data file (after a header line, for XSV).

    Raises:
        ShardCorruptError: naming the file, when a size, the sample count or the offsets disagree with the index.
    """

    def __init__(self, reader: ShardReader, data_path: str, meta_path: str, first_offset: int = 0) -> None:
        self.path = data_path
        meta = map_file(meta_path, reader.parts[1][0].bytes, minimum=8)
        try:
            (count,) = _U32.unpack_from(meta, 0)
            if count != reader.samples:
                raise ShardCorruptError(f'{meta_path}: the meta file counts {count} samples but the index declares '
                                        f'{reader.samples}.')
            self._mm = map_file(data_path, reader.parts[0][0].bytes)
            self._offsets = read_offsets(meta, count, 4, first_offset, first_offset, len(self._mm), meta_path)
        finally:
            if hasattr(meta, 'close'):
                meta.close()
        self._count = count

    def __len__(self) -> int:
        return self._count

    def get_raw(self, index: int) -> bytes:
        """The stored line of sample ``index`` (with its newline)."""
        if not 0 <= index < self._count:
            raise IndexError(f'{self.path}: sample {index} is out of range for a shard of {self._count} samples.')
        return self._mm[self._offsets[index]:self._offsets[index + 1]]

    def close(self) -> None:
        """Release the mapping."""
        mm, self._mm = self._mm, b''
        if hasattr(mm, 'close'):
            mm.close()

    def __enter__(self) -> 'SplitShardView':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
