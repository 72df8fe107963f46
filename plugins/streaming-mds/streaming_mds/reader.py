"""Reading MDS shards: entry validation (:class:`MDSReader`) and memory-mapped random access (:class:`MDSView`).

Layout (spec 2): ``u32 N``, ``u32 offsets[N+1]`` (absolute), the writer's config text, then the samples. A sample
is the ``u32`` lengths of its variable-size columns followed by every column's bytes in column order.

Opening a shard maps the file once, validates the header against the index entry and the offset table (sample
count, monotonic offsets starting after the header, last offset at the file's end), and compiles a decoder for the
shard's columns, so ``view[i]`` is one slice of the mapping, one ``unpack`` of the head and one call per column.

A column projection (``Stream(columns=[...])``: the format's ``columns`` option, see :meth:`MDSFormat.configure`)
compiles a decoder that still walks every column's length (the sample's size check stays whole) but slices and
decodes only the chosen columns: the other columns' bytes are never touched.
"""

from __future__ import annotations

import functools
import os
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from streaming_core.plugin_api import (
    MAX_SHARD_BYTES,
    CodecError,
    IndexFormatError,
    ShardCorruptError,
    ShardReaderBase,
    UnknownNameError,
    UnsafeTypeError,
    checked_projection,
    columns_option,
    get_registry,
    map_file,
    read_offsets,
)
from streaming_mds.encodings import Bytes, Int
from streaming_mds.resolve import get_codec

__all__ = ['MDSReader', 'MDSView', 'MDSFormat', 'compile_decoder']

_U32 = struct.Struct('<I')


class MDSReader(ShardReaderBase):
    """One MDS shard entry of an ``index.json``: validated, cheap to pickle (codecs are resolved on open)."""

    min_bytes_per_sample = 4
    max_file_bytes = MAX_SHARD_BYTES
    format_name = 'mds'
    entry_keys = frozenset({'column_encodings', 'column_names', 'column_sizes', 'compression', 'format', 'hashes',
                            'raw_data', 'samples', 'size_limit', 'version', 'zip_data'})

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate the column lists, resolve every encoding, and refuse unsafe ones unless allowed.

        A layout already validated (every shard of a dataset usually shares one) is recognised and reused.
        """
        names, encodings, sizes = entry['column_names'], entry['column_encodings'], entry['column_sizes']
        try:
            key = (tuple(names), tuple(encodings), tuple(sizes), self.allow_unsafe_types,
                   get_registry('codec').generation)
            known = _VALID_LAYOUTS.get(key)
        except TypeError:  # unhashable garbage in the lists: the full check below reports it
            key, known = None, None
        if known is not None:
            self.column_names, self.column_encodings, self.column_sizes = list(names), list(encodings), list(known)
            return
        self._check_layout(names, encodings, sizes, where)
        if key is not None and len(_VALID_LAYOUTS) < 1024:
            _VALID_LAYOUTS[key] = tuple(self.column_sizes)

    def _check_layout(self, names: Any, encodings: Any, sizes: Any, where: str) -> None:
        if not (isinstance(names, list) and isinstance(encodings, list) and isinstance(sizes, list)):
            raise IndexFormatError(f'{where}: column_names, column_encodings and column_sizes must be lists.')
        if not len(names) == len(encodings) == len(sizes):
            raise IndexFormatError(f'{where}: column_names, column_encodings and column_sizes have different '
                                   f'lengths ({len(names)}, {len(encodings)}, {len(sizes)}).')
        if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise IndexFormatError(f'{where}: column_names must be distinct strings, got {names!r}.')
        if not all(isinstance(e, str) and e for e in encodings):
            raise IndexFormatError(f'{where}: column_encodings must be non-empty strings, got {encodings!r}.')
        fixed: list[int | None] = []
        for name, encoding, size in zip(names, encodings, sizes, strict=True):
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
                raise IndexFormatError(f'{where}: column {name!r} has size {size!r}; expected a positive int or '
                                       f'null.')
            try:
                codec = get_codec(encoding)
            except UnknownNameError as err:
                raise type(err)(f'{where}: column {name!r}: {err}') from None
            except CodecError as err:
                raise IndexFormatError(f'{where}: column {name!r} has an invalid encoding {encoding!r}: '
                                       f'{err}') from err
            if getattr(codec, 'unsafe', False) and not self.allow_unsafe_types:
                raise UnsafeTypeError(f'Column {name} contains an unsafe type: {encoding}. To proceed anyway, set '
                                      f'``allow_unsafe_types=True``. ({where})')
            size = size or None  # the reference treats 0 as variable size
            if codec.size != size:
                raise IndexFormatError(f'{where}: column {name!r} ({encoding}) is recorded with size {size!r}, but '
                                       f'the encoding has size {codec.size!r}.')
            fixed.append(size)
        self.column_names: list[str] = list(names)
        self.column_encodings: list[str] = list(encodings)
        self.column_sizes: list[int | None] = fixed

    #: The columns a projection keeps, in the order samples hold them (``None``: every column).
    projection: tuple[str, ...] | None = None

    def project(self, columns: Sequence[str]) -> None:
        """Read only ``columns`` (in that order): the decoder skips the other columns' bytes.

        Raises:
            ValueError: a name is not a column of this shard, naming it and the shard's columns.
        """
        self.projection = checked_projection(columns, self.column_names, 'MDS shard')
        self.__dict__.pop('_decoder', None)

    def decoder(self) -> Callable[[Any, int, int], dict[str, Any]]:
        """The compiled sample decoder of this entry's column layout (built on first use, then kept): every column,
        or those of :attr:`projection` (whose codecs alone are resolved)."""
        decode = self.__dict__.get('_decoder')
        if decode is None:
            keep = None if self.projection is None else tuple(self.column_names.index(n) for n in self.projection)
            decoders: list[Any] = []
            for i, encoding in enumerate(self.column_encodings):
                if keep is not None and i not in keep:
                    decoders.append(None)  # never decoded (its bytes are only skipped)
                    continue
                codec = get_codec(encoding)
                decoders.append(None if type(codec) is Bytes else INT64 if type(codec) is Int else codec.decode)
            decode = self._decoder = _compiled(tuple(self.column_names), tuple(decoders), tuple(self.column_sizes),
                                               keep)
        return decode

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('_decoder', None)  # compiled code does not pickle; rebuilt on first use
        return state

    def read_sample(self, paths: Sequence[str], index: int) -> dict[str, Any]:
        """Decode one sample with two positioned reads, without mapping the file (cold random access).

        Raises:
            IndexError: ``index`` is out of range.
            ShardCorruptError: naming the file, when its offsets or size disagree with the index.
        """
        if index < 0 or index >= self.samples:
            raise IndexError(f'{paths[0]}: sample {index} is out of range for a shard of {self.samples} samples.')
        fd = os.open(paths[0], os.O_RDONLY)
        try:
            pair = os.pread(fd, 8, 4 + 4 * index)
            begin, end = _PAIR.unpack(pair) if len(pair) == 8 else (0, -1)
            if not 8 + 4 * self.samples <= begin <= end <= self.parts[0][0].bytes:
                raise ShardCorruptError(f'{paths[0]}: sample {index} has offsets {begin}..{end}, outside the file '
                                        f'the index declares ({self.parts[0][0].bytes} bytes); the shard is corrupt.')
            data = os.pread(fd, end - begin, begin)
        finally:
            os.close(fd)
        if len(data) != end - begin:
            raise ShardCorruptError(f'{paths[0]}: sample {index} is cut short (the file is truncated).')
        try:
            return self.decoder()(data, 0, len(data))
        except Exception as err:
            raise ShardCorruptError(f'{paths[0]}: sample {index} cannot be decoded: {type(err).__name__}: '
                                    f'{err}') from err

    def open(self, paths: Sequence[str]) -> MDSView:
        """Map the local raw shard file and validate its header (see :class:`MDSView`)."""
        if len(paths) != 1:
            raise ValueError(f'{self.where}: an MDS shard has one file, got {len(paths)} paths.')
        return MDSView(self, paths[0])


def compile_decoder(names: Sequence[str], decoders: Sequence[Callable[[bytes], Any] | None],
                    sizes: Sequence[int | None], path: str = '') -> Callable[[Any, int, int], dict[str, Any]]:
    """Build ``decode(buffer, start, end) -> dict`` for one column layout, reading straight from the mapped file.

    ``decoders[i]`` is the column's decode function, ``None`` to return the column's bytes as they are, or the
    marker :data:`INT64` for a little-endian int64 read with a precompiled struct. The function is generated once
    per layout (and cached) with the head size, the fixed sizes, the column order and every helper bound as a local;
    it raises ``ShardCorruptError`` when the columns do not exactly fill ``[start, end)``. ``path`` is unused (kept
    for callers of the old signature); the view adds the file name to errors.
    """
    return _compiled(tuple(names), tuple(decoders), tuple(sizes), None)


#: Marker for an ``int`` column: decoded with ``struct.unpack_from('<q')`` instead of a codec call.
INT64 = object()
_Q = struct.Struct('<q')
_PAIR = struct.Struct('<II')
#: Column layouts already validated: (names, encodings, sizes, allow_unsafe_types, codec generation) -> sizes.
_VALID_LAYOUTS: dict[tuple[Any, ...], tuple[int | None, ...]] = {}


@functools.lru_cache(maxsize=256)
def _compiled(names: tuple[str, ...], decoders: tuple[Any, ...], sizes: tuple[int | None, ...],
              keep: tuple[int, ...] | None) -> Callable[[Any, int, int], dict[str, Any]]:
    """The decoder of one layout; ``keep``: the indices of the columns to return, in that order (``None``: all)."""
    nvar = sum(size is None for size in sizes)
    head = struct.Struct(f'<{nvar}I')
    bound: dict[str, Any] = {'_unpack': head.unpack_from, '_Corrupt': ShardCorruptError, '_q': _Q.unpack_from}
    lines = []
    if nvar:
        lines.append(f'    if end - start < {head.size}:')
        lines.append(f'        raise _Corrupt(f"a sample of {{end - start}} bytes is shorter than its {head.size}-byte '
                     f'head.")')
        var_names = [f'l{i}' for i in range(nvar)]
        lines.append(f'    {", ".join(var_names)}{"," if nvar == 1 else ""} = _unpack(buf, start)')
    pos = f'start + {head.size}'
    var = 0
    values: dict[int, str] = {}
    for i, (size, decoder) in enumerate(zip(sizes, decoders, strict=True)):
        if size is None:
            end = f'{pos} + l{var}'
            var += 1
        else:
            end = f'{pos} + {size}'
        lines.append(f'    e{i} = {end}')
        if keep is not None and i not in keep:
            pass  # projected away: only its end is computed
        elif decoder is None:
            values[i] = f'buf[{pos}:e{i}]'
        elif decoder is INT64:
            values[i] = f'_q(buf, {pos})[0]'
        else:
            bound[f'd{i}'] = decoder
            values[i] = f'd{i}(buf[{pos}:e{i}])'
        pos = f'e{i}'
        if keep is None or i in keep:
            bound[f'k{i}'] = names[i]
    lines.append(f'    if {pos} != end:')
    lines.append(f'        raise _Corrupt(f"a sample of {{end - start}} bytes does not match its column sizes '
                 f'(they add up to {{{pos} - start}}).")')
    order = range(len(sizes)) if keep is None else keep
    items = ', '.join(f'k{i}: {values[i]}' for i in order)
    lines.append(f'    return {{{items}}}')
    params = ', '.join(f'{name}={name}' for name in bound)
    source = f'def make({", ".join(bound)}):\n  def decode(buf, start, end, {params}):\n' + '\n'.join(
        '  ' + line for line in lines) + '\n  return decode\n'
    scope: dict[str, Any] = {}
    exec(source, scope)  # noqa: S102 - source built above from integers and fixed identifiers only
    return scope['make'](**bound)


class MDSView:
    """An opened MDS shard: ``len(view)``, ``view[i] -> dict``, ``view.get_raw(i) -> bytes``, ``view.close()``.

    Raises:
        ShardCorruptError: naming the file, when its size differs from the index, its sample count disagrees,
            or its offset table is not monotonic from the end of the header to the end of the file.
    """

    def __init__(self, reader: MDSReader, path: str) -> None:
        self.path = path
        self._mm = map_file(path, reader.parts[0][0].bytes, minimum=8)
        mm = self._mm
        (count,) = _U32.unpack_from(mm, 0)
        if count != reader.samples:
            self.close()
            raise ShardCorruptError(f'{path}: the shard header counts {count} samples but the index declares '
                                    f'{reader.samples}; the file does not belong to this index entry.')
        try:
            self._offsets = read_offsets(mm, count, 4, 8 + 4 * count, None, len(mm), path)
        except ShardCorruptError:
            self.close()
            raise
        self._count = count
        self._decode = reader.decoder()

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> dict[str, Any]:
        if index < 0 or index >= self._count:
            raise IndexError(f'{self.path}: sample {index} is out of range for a shard of {self._count} samples.')
        offsets = self._offsets
        try:
            return self._decode(self._mm, offsets[index], offsets[index + 1])
        except Exception as err:  # a column's bytes do not decode (layout, invalid UTF-8, JSON, number text...)
            raise ShardCorruptError(f'{self.path}: sample {index} cannot be decoded: {type(err).__name__}: '
                                    f'{err}') from err

    def samples(self, indices: Sequence[int]) -> Iterator[dict[str, Any]]:
        """Decode the samples at ``indices`` (all in range: the caller planned them) in one tight loop."""
        decode, mm, offsets = self._decode, self._mm, self._offsets
        index = -1
        try:
            for index in indices:
                yield decode(mm, offsets[index], offsets[index + 1])
        except GeneratorExit:
            raise
        except Exception as err:
            if isinstance(err, IndexError) and not 0 <= index < self._count:
                raise
            raise ShardCorruptError(f'{self.path}: sample {index} cannot be decoded: {type(err).__name__}: '
                                    f'{err}') from err

    def get_raw(self, index: int) -> bytes:
        """The stored bytes of sample ``index`` (head and columns)."""
        if not 0 <= index < self._count:
            raise IndexError(f'{self.path}: sample {index} is out of range for a shard of {self._count} samples.')
        return self._mm[self._offsets[index]:self._offsets[index + 1]]

    def close(self) -> None:
        """Release the mapping."""
        mm = self._mm
        self._mm = b''
        if hasattr(mm, 'close'):
            mm.close()

    def __enter__(self) -> MDSView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MDSFormat:
    """The ``mds`` shard format: validates entries into :class:`MDSReader` and names its writer.

    Args:
        columns: Read only these columns, in this order (the ``columns`` format option; ``None``: all).
    """

    name = 'mds'
    #: The format options a stream may give (``Stream(columns=[...])``); see :meth:`configure`.
    option_names = ('columns',)

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        self.columns = tuple(columns) if columns is not None else None

    def configure(self, options: Mapping[str, Any]) -> MDSFormat:
        """The format with a stream's options (names among :attr:`option_names`; the core checks them).

        Raises:
            ValueError: ``columns`` is not a non-empty list of distinct names.
        """
        return MDSFormat(columns_option(options))

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> MDSReader:
        """Validate one index entry and return its reader (projected to :attr:`columns` when set).

        Raises:
            ValueError: a projected column is not in the entry (naming it and the entry's columns).
        """
        reader = MDSReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)
        if self.columns is not None:
            reader.project(self.columns)
        return reader

    @property
    def writer(self) -> type:
        """The :class:`~streaming_mds.writer.MDSWriter` class."""
        from streaming_mds.writer import MDSWriter
        return MDSWriter
