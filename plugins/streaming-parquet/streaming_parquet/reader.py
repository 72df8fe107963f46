"""The ``parquet`` shard format: an index entry per row group, a unit (:class:`ParquetReader`), and an opened row group
(:class:`ParquetView`) that decodes its rows (or one slice of a huge row group) to columns once, then indexes.

Values come back as users expect: ``str``, ``bytes``, ``int``, ``float``, ``bool``, ``None`` for nulls, lists of
numbers as NumPy arrays (a null in a float list is ``nan``, and a list of integers or booleans holding a null stays
a ``list`` with ``None``), other lists as lists, structs as dicts (a Hugging Face image column stays its
``{'bytes', 'path'}`` dict unless the entry lists it under ``images``: then a PIL image). Every read of a row gets
its own arrays, lists and dicts (:func:`_copier`): a caller that changes one in place changes no later read.

Only the entry's ``columns`` are read: pyarrow reads just those columns' chunks of the file (a projected index,
``ParquetStream(columns=...)``, never touches the others' bytes).
"""

from __future__ import annotations

import copy
import io
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import (
    PAGE_CHECKSUMS_ENV,
    CodecError,
    DatasetVersionError,
    IndexFormatError,
    ShardCorruptError,
    ShardReaderBase,
    check_page_checksums,
)

__all__ = ['ParquetReader', 'ParquetView', 'ParquetFormat', 'SLICE_ROWS', 'DECODED_BYTES', 'decoded_budget',
           'decoded_bytes', 'decoded_cache', 'footers']

#: Rows decoded at once: a row group larger than this is decoded in slices of this many rows (bounded memory).
SLICE_ROWS = 32768
#: Nanoseconds after a file's modification time during which a write of the same size may leave its size and
#: modification time as they were (the kernel stamps writes with a coarse clock; some filesystems keep seconds).
RACY_NS = 2_000_000_000
#: Bytes at the end of a file compared while its stat cannot tell a rewrite, when its footer cannot be located.
TAIL_BYTES = 1 << 16


def decoded_budget(value: str | None) -> int:
    """The decoded-slice budget from ``$STREAMING_PARQUET_DECODED_BYTES`` (``None``: the default, 512 MiB): a byte
    count or size (``'2000000000'``, ``'512mb'``, ``'512MiB'``, ``'1.5gb'``), at least 0 (0 keeps only the newest
    slice).

    Raises:
        ValueError: naming the variable, its value and what is valid.
    """
    if value is None or not value.strip():
        return 512 << 20
    from streaming_core.plugin_api import bytes_to_int
    try:
        budget = bytes_to_int(value)
    except ValueError:
        budget = -1
    if budget < 0:
        raise ValueError(f'STREAMING_PARQUET_DECODED_BYTES={value!r} is not a byte size: give a count of bytes '
                         f'>= 0 or a size such as 512mb or 1.5gb (or unset it for the default, 512mb).')
    return budget


#: The default of the decoded rows kept per process, across every open file, in bytes (estimated: the Arrow size
#: plus 64 bytes per value for the Python objects); ``$STREAMING_PARQUET_DECODED_BYTES`` overrides it (bytes, or
#: ``'1gb'``...; :func:`decoded_bytes`). A shuffle reads a file's rows in random order, so each slice should be
#: decoded once per epoch, not once per sample: the budget holds the slices the shuffle's window touches, the oldest
#: decoded first out (at least the newest stays).
DECODED_BYTES = 512 << 20
_parsed: tuple[str | None, int] = (None, DECODED_BYTES)


def decoded_bytes() -> int:
    """The budget of decoded slices now: ``$STREAMING_PARQUET_DECODED_BYTES`` (parsed once per value), else
    :data:`DECODED_BYTES`. Read when a Parquet file is first described, not when the plugin is imported, so a bad
    value is reported as what it is, by the dataset that reads Parquet.

    Raises:
        ValueError: the variable is not a byte size (naming it and its value).
    """
    global _parsed
    value = os.environ.get('STREAMING_PARQUET_DECODED_BYTES')
    if value is None or not value.strip():
        return DECODED_BYTES
    if _parsed[0] != value:
        _parsed = (value, decoded_budget(value))
    return _parsed[1]


class _DecodedCache:
    """The budget of the process's decoded slices. Each view keeps its slices in its own dict (no lock on the
    per-sample path); this records them in decoding order with their estimated sizes, and past
    :data:`DECODED_BYTES` removes the oldest from their view (at least the newest stays)."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[int, int, int], tuple[int, dict[tuple[int, int], Any]]] = OrderedDict()
        self.bytes = 0
        self._lock = threading.Lock()
        self.decodes = 0

    def __len__(self) -> int:
        return len(self._items)

    def put(self, key: tuple[int, int, int], cost: int, owner: dict[tuple[int, int], Any]) -> None:
        """Record a slice its view just stored in ``owner`` under ``key[1:]``; evict past the budget."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= old[0]
            self._items[key] = (cost, owner)
            self.bytes += cost
            self.decodes += 1
            budget = decoded_bytes()
            while self.bytes > budget and len(self._items) > 1:
                (_, group, part), (freed, holder) = self._items.popitem(last=False)
                holder.pop((group, part), None)
                self.bytes -= freed

    def drop(self, token: int) -> None:
        """Forget every slice of one view."""
        with self._lock:
            for key in [k for k in self._items if k[0] == token]:
                cost, holder = self._items.pop(key)
                holder.pop(key[1:], None)
                self.bytes -= cost

    def keys_of(self, token: int) -> list[tuple[int, int]]:
        """``(group, part)`` of the slices of one view held now."""
        with self._lock:
            return [(k[1], k[2]) for k in self._items if k[0] == token]

    def reset(self) -> None:
        """Empty (after a fork: the parent's lock may have been held)."""
        self._items = OrderedDict()
        self.bytes = 0
        self._lock = threading.Lock()


#: The process's decoded slices (see :class:`_DecodedCache`).
decoded_cache = _DecodedCache()
os.register_at_fork(after_in_child=decoded_cache.reset)
_TOKENS = itertools.count()


class _Footers:
    """Parsed footers of local files, per process, keyed by path and stat identity (a file evicted and downloaded
    again is parsed again): the views of a file's row groups open it without parsing its footer each time. Bounded
    (least recently used out); no file handle is kept."""

    LIMIT = 64

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[Any, ...], tuple[Any, dict[str, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> tuple[Any, dict[str, str]] | None:
        """``(FileMetaData, {column name: Arrow type})`` of that version of the file, if parsed before."""
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], metadata: Any, names: dict[str, str]) -> None:
        """Keep a parsed footer."""
        with self._lock:
            self._items[key] = (metadata, names)
            while len(self._items) > self.LIMIT:
                self._items.popitem(last=False)

    def reset(self) -> None:
        """Empty (after a fork: the parent's lock may have been held)."""
        self._items = OrderedDict()
        self._lock = threading.Lock()


#: The process's parsed footers (see :class:`_Footers`).
footers = _Footers()
os.register_at_fork(after_in_child=footers.reset)


class ParquetReader(ShardReaderBase):
    """One ``parquet`` index entry, a unit: one row group (``row_group``, holding ``samples`` rows) of one Parquet
    file (``raw_data``), with the columns to read (name and Arrow type)."""

    format_name = 'parquet'
    entry_keys = frozenset({'columns', 'compression', 'format', 'hashes', 'raw_data', 'row_group', 'samples',
                            'size_limit', 'version', 'zip_data'})
    #: Keys an entry may add: ``images``, the columns decoded to PIL images.
    optional_keys = frozenset({'images'})
    part_names = ('data',)

    def __init__(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> None:
        if isinstance(entry, Mapping) and 'row_groups' in entry and 'row_group' not in entry:
            raise IndexFormatError(f'{where or "parquet shard"}: a parquet entry of the old one-entry-per-file '
                                   f'layout ("row_groups"); this streaming-parquet reads one entry per row group. A '
                                   f'derived index is rebuilt in that layout on the next construction; an index '
                                   f'written by hand needs one entry per row group ("row_group": its number).')
        optional = {key: entry[key] for key in self.optional_keys if isinstance(entry, Mapping) and key in entry}
        if optional:
            entry = {key: value for key, value in entry.items() if key not in optional}
        self._optional = optional
        super().__init__(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate ``columns`` (``[[name, type], ...]``) and ``row_group`` (the row group's number in the file)."""
        columns = entry['columns']
        if not isinstance(columns, list) or not all(
                isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c) for c in columns):
            raise IndexFormatError(f'{where}: "columns" must be a list of [name, type] pairs, got {columns!r}.')
        group = entry['row_group']
        if not isinstance(group, int) or isinstance(group, bool) or group < 0:
            raise IndexFormatError(f'{where}: "row_group" must be a row group number (an int >= 0), got {group!r}.')
        if self.compression is not None:
            raise IndexFormatError(f'{where}: a parquet entry has no file-level compression (Parquet compresses '
                                   f'its pages), got {self.compression!r}.')
        self.columns: list[tuple[str, str]] = [(c[0], c[1]) for c in columns]
        self.row_group: int = group
        images = self._optional.get('images', [])
        names = {name for name, _ in self.columns}
        if not isinstance(images, list) or not all(isinstance(n, str) and n in names for n in images):
            raise IndexFormatError(f'{where}: "images" must list columns of the entry, got {images!r}.')
        self.images: frozenset[str] = frozenset(images)

    def open(self, paths: Sequence[str]) -> ParquetView:
        """Open the unit's row group of the local file and check it against the entry."""
        if len(paths) != 1:
            raise ValueError(f'{self.where}: a parquet shard is one file, got {len(paths)} paths.')
        return ParquetView(self, paths[0])


def _numeric_list(kind: Any) -> bool:
    import pyarrow as pa
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
        return False
    value = kind.value_type
    return pa.types.is_integer(value) or pa.types.is_floating(value) or pa.types.is_boolean(value)


def _fresh(value: Any) -> Any:
    """A copy of a decoded list-of-numbers value (an array, or a list holding ``None``)."""
    return value.copy() if isinstance(value, np.ndarray) else copy.deepcopy(value)


def _copier(kind: Any) -> Any:
    """How a read of a row copies a value of the Arrow type ``kind`` out of the decoded slice, or ``None`` when its
    values are immutable (``str``, ``bytes``, numbers, ``None``, dates): the slice is kept for later reads, so a
    mutable value handed out as is would carry a caller's in-place change into every later read of that row."""
    import pyarrow as pa
    if pa.types.is_dictionary(kind):
        return _copier(kind.value_type)
    if isinstance(kind, pa.ExtensionType):
        return _copier(kind.storage_type)
    if _numeric_list(kind):
        return _fresh
    return copy.deepcopy if pa.types.is_nested(kind) else None


def _image(value: Any, path: str, column: str) -> Any:
    """A Hugging Face image struct ``{'bytes', 'path'}`` as a loaded PIL image (``None`` stays ``None``)."""
    if value is None:
        return None
    data = value.get('bytes') if isinstance(value, dict) else None
    if data is None:
        raise ShardCorruptError(f'{path}: image column {column!r} holds no bytes (only the path '
                                f'{value.get("path") if isinstance(value, dict) else value!r}); images must be '
                                f'embedded to be decoded. Read it without decode_images to get the dict.')
    from streaming_parquet.builder import require_pillow
    Image = require_pillow()
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as err:  # PIL raises many kinds for bad data
        raise ShardCorruptError(f'{path}: image column {column!r} holds bytes PIL cannot decode '
                                f'({type(err).__name__}: {err}).') from None
    return image


def _column_values(array: Any) -> list[Any]:
    """One decoded column of a slice as Python values (lists of numbers as NumPy arrays).

    A list of floats holding a null gives ``nan`` there (NumPy's missing float); a list of integers or booleans
    holding a null stays a Python ``list`` with ``None`` there (an integer array has no missing value, and a float
    array would change the type and lose integers above 2**53)."""
    import pyarrow as pa
    if not _numeric_list(array.type):
        return array.to_pylist()
    value_type = array.type.value_type
    dtype = value_type.to_pandas_dtype()
    nulls = array.flatten().null_count > 0 and not pa.types.is_floating(value_type)
    out: list[Any] = []
    for value in array.to_pylist():
        if value is None:
            out.append(None)
        elif nulls and None in value:
            out.append(value)
        else:
            out.append(np.array(value, dtype=dtype))
    return out


class ParquetView:
    """One row group of an opened Parquet file: ``view[i]`` is its row ``i`` as a dict of the entry's columns.

    The row group is decoded (only the entry's columns, in slices of :data:`SLICE_ROWS` rows when larger) the first
    time one of its rows is read; the file's footer is parsed once per process (:data:`footers`).

    Raises:
        ShardCorruptError: naming the file, when it cannot be read or disagrees with its index entry.
    """

    def __init__(self, reader: ParquetReader, path: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        self.path = path
        self._reader = reader
        self._token = next(_TOKENS)
        self._decoding = threading.Lock()
        self._slices: dict[tuple[int, int], tuple[int, list[list[Any]]]] = {}  # (group, part) -> (first, columns)
        self._group = reader.row_group
        self._count = reader.samples
        self._slice_rows = SLICE_ROWS
        self._key0 = (self._group, 0)
        self._single = self._count <= self._slice_rows
        self._names = [name for name, _ in reader.columns]
        expected = reader.parts[0][0].bytes
        try:
            # Plain positioned reads (not a memory map): only the byte ranges of the read columns' chunks are read.
            self._source = pa.OSFile(path)
        except (pa.ArrowException, OSError) as err:
            if isinstance(err, FileNotFoundError):
                raise
            raise ShardCorruptError(f'{path}: cannot be opened ({type(err).__name__}: {err}).') from None
        stat = os.fstat(self._source.fileno())  # of the file opened, which a rename over the path does not change
        if stat.st_size != expected:
            self._source.close()
            raise ShardCorruptError(f'{path}: the file has {stat.st_size} bytes but the index declares {expected} '
                                    f'(truncated or replaced); delete it so it is fetched again.')
        key = (path, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        self._opened_as = (stat.st_size, stat.st_mtime_ns)
        self._ctime_ns = stat.st_ctime_ns
        self._opened_tail = self._tail()
        # Modified moments ago: a rewrite of the same size now could keep this stat, so the file's tail is compared
        # too, until a check after that window (and a footer parsed for the same stat is not reused).
        self._racy = time.time_ns() - stat.st_mtime_ns < RACY_NS
        parsed = None if self._racy else footers.get(key)
        try:
            # Pages written with a checksum are checked: a damaged page fails instead of giving a wrong value.
            self._file = pq.ParquetFile(self._source, metadata=None if parsed is None else parsed[0],
                                        page_checksum_verification=check_page_checksums())
            metadata = self._file.metadata
            if parsed is None:
                parsed = (metadata, {field.name: str(field.type) for field in metadata.schema.to_arrow_schema()})
                footers.put(key, *parsed)
            groups = metadata.num_row_groups
            rows = metadata.row_group(self._group).num_rows if self._group < groups else None
        except (pa.ArrowException, OSError, ValueError) as err:
            self.close()
            raise ShardCorruptError(f'{path}: not a readable Parquet file ({type(err).__name__}: {err}).') from None
        if rows != self._count:
            self.close()
            found = f'holds {rows} rows' if rows is not None else f'does not exist (the file has {groups})'
            raise ShardCorruptError(f'{path}: row group {self._group} {found}, but the index records '
                                    f'{self._count} rows (the file was replaced or is corrupt; where a sidecar '
                                    f'index, parquet-index.json, describes the directory, run "streaming index DIR" '
                                    f'again after changing its files).')
        missing = [name for name in self._names if name not in parsed[1]]
        if missing:
            self.close()
            raise ShardCorruptError(f'{path}: columns {missing} recorded in the index are missing from the file.')
        changed = [f'{name!r} is {parsed[1][name]} in the file but {kind} in the index'
                   for name, kind in reader.columns if parsed[1][name] != kind]
        if changed:  # a file replaced after the index (or a sidecar) described it: never values of two types
            self.close()
            raise ShardCorruptError(f'{path}: column {", ".join(changed)} (the file was replaced since the index was '
                                    f'made; construct the dataset again, or run "streaming index" again if the '
                                    f'directory has a sidecar).')
        schema = self._file.schema_arrow
        images = set(reader.images)  # decoded into a new PIL image at every read
        self._copies = [(name, found) for name in self._names
                        if name not in images and (found := _copier(schema.field(name).type)) is not None]

    def __len__(self) -> int:
        return self._count

    def _decode(self, part: int) -> tuple[int, list[list[Any]]]:
        """Decode slice ``part`` of the row group: ``(its first row, its columns)`` (kept under the budget), once:
        threads reading one view wait for the first one's decoding (pyarrow's ``ParquetFile`` is not safe to read
        from two threads at once: it answered with garbage that looked like a corrupt file)."""
        with self._decoding:
            found = self._slices.get((self._group, part))
            return found if found is not None else self._decode_now(part)

    def _decode_now(self, part: int) -> tuple[int, list[list[Any]]]:
        import pyarrow as pa
        group = self._group
        self._check_unchanged()
        first = 0 if self._single else part * self._slice_rows
        try:
            if self._single:
                table = self._file.read_row_group(group, columns=self._names)
            else:
                table = self._rows(first, min(first + self._slice_rows, self._count))
        except (pa.ArrowException, OSError) as err:
            hint = (f' (if its writer wrote wrong page checksums, {PAGE_CHECKSUMS_ENV}=0 skips the check)'
                    if 'CRC' in str(err) else '')
            raise ShardCorruptError(f'{self.path}: row group {group} cannot be decoded ({type(err).__name__}: '
                                    f'{err}); the file is corrupt{hint}.') from None
        columns = []
        for name in self._names:
            try:  # chunk by chunk: one chunk of more than 2 GiB of strings cannot be built
                columns.append([value for chunk in table.column(name).chunks for value in _column_values(chunk)])
            except Exception as err:  # a value pyarrow read but that cannot become a Python value
                raise CodecError(f'{self.path}: row group {group}, column {name!r} '
                                 f'({table.schema.field(name).type}): its values cannot be decoded '
                                 f'({type(err).__name__}: {err}). Leave the column out with columns=, or rewrite '
                                 f'it.') from err
        found = (first, columns)
        self._slices[(group, part)] = found
        decoded_cache.put((self._token, group, part),
                          int(table.nbytes) + 64 * table.num_rows * max(len(self._names), 1), self._slices)
        return found

    def _check_unchanged(self) -> None:
        """The open file (its descriptor: a file renamed over the path is not the one read) still has the size and
        modification time it had when its footer was read: a file rewritten in place while a job reads it would give
        the new bytes under the old footer and index (one ``fstat`` per decoded slice)."""
        try:
            now = os.fstat(self._source.fileno())
        except (OSError, ValueError):
            return  # closed: pyarrow's read reports it
        rewritten = (now.st_size, now.st_mtime_ns) != self._opened_as
        how = (f'size and modification time {self._opened_as[0]}, {self._opened_as[1]} when opened; now '
               f'{now.st_size}, {now.st_mtime_ns}')
        if not rewritten and (self._racy or now.st_ctime_ns != self._ctime_ns):
            # The stat cannot tell: a write within the coarse clock's tick of the last one, or one whose
            # modification time was put back (cp -p, touch -r; a chmod too, which changes nothing read).
            checked_at = time.time_ns()  # before the read: a write that keeps the stat came before it
            rewritten = self._tail() != self._opened_tail
            how = (f'the same size and modification time, but other bytes at its end (written again within '
                   f'{RACY_NS // 10**9} s of the last write, or its modification time put back)')
            if not rewritten:
                self._ctime_ns = now.st_ctime_ns
                if checked_at - now.st_mtime_ns >= RACY_NS:
                    self._racy = False  # from now on, a write moves the modification time
        if rewritten:
            raise DatasetVersionError(
                f'{self.path} was rewritten in place while this job read it ({how}). Reading on would serve the new '
                f'bytes under the old index. Restart the job to read the new version; write new versions of a '
                f'dataset to new files or directories.')

    def _tail(self) -> bytes:
        """A hash of the open file's whole footer (where the row groups' sizes and statistics are) and the 4 KiB
        before it, the bytes the index builder prints (:meth:`ParquetIndexBuilder.print_span`); of its last
        :data:`TAIL_BYTES` when the footer cannot be located. A footer can pass 64 KiB (a table of 1,200 columns):
        its last bytes are then schema metadata alone, the same in two versions."""
        import hashlib

        from streaming_parquet.builder import footer_span
        size, handle = self._opened_as[0], self._source.fileno()
        span = footer_span(os.pread(handle, 8, max(size - 8, 0)), size)
        start, length = span if span is not None else (max(size - TAIL_BYTES, 0), min(size, TAIL_BYTES))
        digest = hashlib.blake2b(digest_size=16)
        for offset in range(start, start + length, 1 << 22):  # in pieces of 4 MiB
            digest.update(os.pread(handle, min(1 << 22, start + length - offset), offset))
        return digest.digest()

    def _rows(self, start: int, stop: int) -> Any:
        """Rows ``[start, stop)`` of the row group as a table. pyarrow's batches hold *at most* the rows asked for
        (fewer where the decoded values would pass 2 GiB), so the rows are counted, not the batches."""
        import pyarrow as pa
        pieces = []
        offset = 0
        for batch in self._file.iter_batches(batch_size=self._slice_rows, row_groups=[self._group],
                                             columns=self._names):
            end = offset + batch.num_rows
            low, high = max(start - offset, 0), min(stop, end) - offset
            if high > low:
                pieces.append(batch.slice(low, high - low))
            offset = end
            if offset >= stop:
                break
        if sum(piece.num_rows for piece in pieces) != stop - start:
            raise ShardCorruptError(f'{self.path}: row group {self._group} ended at row {offset}, before row '
                                    f'{stop} (the index records {self._count} rows).')
        return pa.Table.from_batches(pieces)

    def _locate(self, index: int) -> tuple[int, list[list[Any]]]:
        """``(row within its slice, the slice's columns)`` of row ``index``."""
        if not 0 <= index < self._count:
            raise IndexError(f'{self.path}: sample {index} is out of range for row group {self._group} of '
                             f'{self._count} rows.')
        if self._single:
            found = self._slices.get(self._key0)
            return index, (found if found is not None else self._decode(0))[1]
        part = index // self._slice_rows
        found = self._slices.get((self._group, part))
        first, columns = found if found is not None else self._decode(part)
        return index - first, columns

    def _decode_images(self, sample: dict[str, Any]) -> dict[str, Any]:
        for name in self._reader.images:  # per sample: a slice of decoded images could be gigabytes
            sample[name] = _image(sample[name], self.path, name)
        return sample

    def __getitem__(self, index: int) -> dict[str, Any]:
        row, columns = self._locate(index)
        sample = {name: values[row] for name, values in zip(self._names, columns)}
        for name, fresh in self._copies:
            sample[name] = fresh(sample[name])
        return self._decode_images(sample) if self._reader.images else sample

    def samples(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The rows at ``positions`` in order (the runtime's fast path over a stretch of one row group)."""
        names = self._names
        images = bool(self._reader.images)
        locate = self._locate
        copies = self._copies
        for index in positions:
            row, columns = locate(index)
            sample = {name: values[row] for name, values in zip(names, columns)}
            for name, fresh in copies:
                sample[name] = fresh(sample[name])
            yield self._decode_images(sample) if images else sample

    def close(self) -> None:
        """Drop the decoded slices and the file."""
        decoded_cache.drop(self._token)
        self._slices.clear()
        for attr in ('_file', '_source'):
            handle = getattr(self, attr, None)
            if handle is not None:
                try:
                    handle.close()
                except Exception:  # already closed
                    pass

    def __enter__(self) -> 'ParquetView':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ParquetFormat:
    """The ``parquet`` shard format (read-only: Parquet files are written by the tools that make them)."""

    name = 'parquet'
    #: Several units (row groups) name one file: the core downloads, counts and evicts it once for all of them.
    units_share_files = True

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False,
               where: str = '') -> ParquetReader:
        """Validate one index entry and return its reader."""
        decoded_bytes()  # a bad $STREAMING_PARQUET_DECODED_BYTES fails here, at construction, not mid-epoch
        return ParquetReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    @property
    def writer(self) -> type:
        """Parquet has no writer here: write the files with pyarrow, pandas, Spark..., then stream the directory."""
        raise NotImplementedError('streaming-parquet reads Parquet files; write them with pyarrow, pandas or Spark '
                                  '(no index.json is needed), or convert to MDS with MDSWriter.')
