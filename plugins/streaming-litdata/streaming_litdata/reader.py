"""The ``litdata`` shard format: one index entry per litdata chunk (:class:`LitdataReader`) and an opened chunk
(:class:`LitdataView`).

A chunk file is ``[num_items: u32][offsets: u32 * (num_items + 1)][items]``; an item is ``[size: u32 per leaf]``
followed by the leaves' bytes, decoded by the dataset's ``data_format`` and put back together by its ``data_spec``
(see :mod:`streaming_litdata.decode`). A chunk whose rows litdata stored only as a trailing Arrow IPC file (rows of
plain values) is read from that file with pyarrow, each row built when it is read (see
:mod:`streaming_litdata.arrow_rows`).

Compressed chunks (``optimize(..., compression='zstd')``, see :mod:`streaming_litdata.framed`): with
``compression_level='batch'`` (the default) a chunk starting with litdata's ``LDFZ01`` magic holds its items' bytes
in zstd frames of ``frame_rows`` items, inflated one frame at a time (the last one kept); with ``'sample'`` each
item between the classic offsets is its own zstd frame. With ``compression_level='chunk'`` the whole ``.zstd.bin``
file is one zstd frame: the index entry is a compressed shard (``compression='zstd'``), which the core decompresses
into the classic chunk this reader opens.

An entry with ``columns`` (``Stream(columns=[...])``, see :mod:`streaming_litdata.builder`) keeps only those
top-level keys of each item, in that order: only their leaves are decoded (an item's bytes are still inflated whole
when its chunk is compressed), and only their Arrow columns are converted.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError, ShardReaderBase, map_file
from streaming_litdata.arrow_rows import ARROW_MAGIC, ArrowRows, arrow_rows
from streaming_litdata.decode import Spec, count_leaves, decoder, key_leaves, parse_spec, top_level_keys, unflatten
from streaming_litdata.framed import FramedChunk, inflate_item, is_framed

__all__ = ['LitdataReader', 'LitdataView', 'LitdataFormat', 'ARROW_MAGIC']

#: The ``data_format`` names of plain values: litdata stores rows made only of these as a trailing Arrow file.
_PLAIN_FORMATS = frozenset({'int', 'float', 'bool', 'str', 'text', 'bytes', 'json'})


def _preload_pyarrow(formats: Sequence[str]) -> None:
    """Import pyarrow now when chunks of these ``data_format`` names may carry Arrow rows: the reader is built in
    the process that forks the DataLoader workers, which then inherit it instead of each importing it every epoch."""
    if formats and all(name.partition(':')[0] in _PLAIN_FORMATS for name in formats):
        try:
            import pyarrow  # noqa: F401
        except ImportError:  # a chunk with Arrow rows then names what is missing when it is opened
            pass


class LitdataReader(ShardReaderBase):
    """One ``litdata`` index entry: one chunk file, its item count and the dataset's ``data_format``/``data_spec``."""

    format_name = 'litdata'
    entry_keys = frozenset({'columns', 'compression', 'data_format', 'data_spec', 'format', 'hashes',
                            'in_file_compression', 'raw_data', 'samples', 'size_limit', 'version', 'zip_data'})
    part_names = ('data',)
    min_bytes_per_sample = 4  # one offset per item

    def __init__(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> None:
        if isinstance(entry, Mapping):  # indexes derived before these keys existed
            defaults = {key: None for key in ('in_file_compression', 'columns') if key not in entry}
            if defaults:
                entry = {**entry, **defaults}
        super().__init__(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate ``data_format`` (names) and ``data_spec`` (a pytree spec string or null)."""
        formats = entry['data_format']
        if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
            raise IndexFormatError(f'{where}: "data_format" must be a list of names, got {formats!r}.')
        spec_text = entry['data_spec']
        if spec_text is not None and not isinstance(spec_text, str):
            raise IndexFormatError(f'{where}: "data_spec" must be a string or null, got {spec_text!r}.')
        wrap = entry['in_file_compression']
        if wrap not in (None, 'batch', 'sample'):
            raise IndexFormatError(f'{where}: "in_file_compression" must be null, "batch" or "sample", got {wrap!r}.')
        if self.compression is not None and (self.compression.partition(':')[0] != 'zstd' or wrap is not None):
            raise IndexFormatError(f'{where}: a compressed litdata chunk is a whole-file zstd chunk (compression '
                                   f'"zstd", in_file_compression null), got compression {self.compression!r} with '
                                   f'in_file_compression {wrap!r}.')
        self.in_file_compression: str | None = wrap
        self.data_format: list[str] = list(formats)
        self.data_spec: str | None = spec_text
        self._decoders = [decoder(name, where) for name in formats]
        self._spec = parse_spec(spec_text, where)
        _preload_pyarrow(self.data_format)
        if self._spec is not None and count_leaves(self._spec) != len(formats):
            raise IndexFormatError(f'{where}: "data_spec" has {count_leaves(self._spec)} leaves but "data_format" '
                                   f'names {len(formats)}.')
        columns = entry['columns']
        if columns is not None and (not isinstance(columns, list) or not columns or not all(
                isinstance(name, str) for name in columns) or len(set(columns)) != len(columns)):
            raise IndexFormatError(f'{where}: "columns" must be null or a list of distinct keys, got {columns!r}.')
        #: The top-level keys kept, in order (None: whole items).
        self.columns: list[str] | None = list(columns) if columns is not None else None
        #: ``(key, first leaf, end leaf, spec)`` of each kept key.
        self._keep: list[tuple[str, int, int, Spec]] | None = None
        if columns is not None:
            keys = top_level_keys(self._spec)
            missing = [name for name in columns if keys is None or name not in keys]
            if missing:
                raise IndexFormatError(f'{where}: "columns" names {missing}, which are not top-level keys of its '
                                       f'items ({keys}).')
            self._keep = key_leaves(self._spec, list(columns))  # type: ignore[arg-type]

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('_decoders', None)  # lambdas: rebuilt after unpickling
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._decoders = [decoder(name, self.where) for name in self.data_format]

    def decode(self, item: bytes | memoryview, where: str) -> Any:
        """One item's bytes to its value.

        Raises:
            ShardCorruptError: the item is shorter than its size header says, or a leaf does not decode (naming
                ``where``).
        """
        count = len(self._decoders)
        head = 4 * count
        if len(item) < head:
            raise ShardCorruptError(f'{where}: an item of {len(item)} bytes is shorter than its {head}-byte size '
                                    f'header.')
        sizes = struct.unpack_from(f'<{count}I', item, 0)
        if head + sum(sizes) > len(item):
            raise ShardCorruptError(f'{where}: an item of {len(item)} bytes declares {head + sum(sizes)}.')
        try:
            if self._keep is not None:
                return self._decode_kept(item, sizes, head)
            leaves = []
            position = head
            for size, decode in zip(sizes, self._decoders):
                leaves.append(decode(bytes(item[position:position + size])))
                position += size
            return unflatten(leaves, self._spec)
        except ShardCorruptError:
            raise
        except Exception as err:  # a damaged leaf fails inside its decoder (numpy, PIL, struct, utf-8...)
            raise ShardCorruptError(f'{where}: an item does not decode with the data format {self.data_format} '
                                    f'({type(err).__name__}: {err}); the chunk is damaged.') from err

    def _decode_kept(self, item: bytes | memoryview, sizes: tuple[int, ...], head: int) -> dict[str, Any]:
        """The kept keys of an item (:attr:`columns`), decoding only their leaves."""
        starts = [head]
        for size in sizes:
            starts.append(starts[-1] + size)
        decoders = self._decoders
        out: dict[str, Any] = {}
        for key, first, end, spec in self._keep:  # type: ignore[union-attr]
            leaves = [decoders[n](bytes(item[starts[n]:starts[n + 1]])) for n in range(first, end)]
            out[key] = unflatten(leaves, spec)
        return out

    def open(self, paths: Sequence[str]) -> LitdataView:
        """Open the local chunk and check it against the entry."""
        if len(paths) != 1:
            raise ValueError(f'{self.where}: a litdata shard is one file, got {len(paths)} paths.')
        return LitdataView(self, paths[0])


class LitdataView:
    """An opened chunk: ``view[i]`` is item ``i`` (a dict, list, tuple or single value, as it was written).

    Raises:
        ShardCorruptError: naming the file, when it is shorter than the index says or its offsets are inconsistent.
    """

    def __init__(self, reader: LitdataReader, path: str) -> None:
        self.path = path
        self._reader = reader
        raw = reader.parts[0][0]
        self._map: Any = map_file(path, raw.bytes)
        size = raw.bytes
        count = reader.samples
        self._framed: FramedChunk | None = None
        self._rows: ArrowRows | None = None
        if reader.in_file_compression == 'batch' and is_framed(self._map):
            self._framed = FramedChunk(self._map, size, count, path)
            return
        header = 4 + 4 * (count + 1)
        if size < header:
            raise ShardCorruptError(f'{path}: {size} bytes cannot hold the header of {count} items ({header} bytes); '
                                    f'the chunk is shorter than its index says (truncated).')
        (stored,) = struct.unpack_from('<I', self._map, 0)
        if stored != count:
            raise ShardCorruptError(f'{path}: the chunk holds {stored} items but index.json says {count}.')
        offsets = np.frombuffer(self._map, dtype='<u4', count=count + 1, offset=4).astype(np.int64)
        if offsets[0] != header or np.any(np.diff(offsets) < 0) or offsets[-1] > size:
            raise ShardCorruptError(f'{path}: the item offsets are inconsistent with a {size}-byte chunk (truncated '
                                    f'or corrupt).')
        self._offsets = offsets.tolist()
        if count and offsets[-1] == header and reader.data_format:  # items live only in a trailing Arrow file
            self._rows = arrow_rows(self._map, size, count, path, reader.columns)

    def __len__(self) -> int:
        return self._reader.samples

    def __getitem__(self, index: int) -> Any:
        if not 0 <= index < self._reader.samples:
            raise IndexError(f'{self.path}: item {index} is out of range for a chunk of {self._reader.samples}.')
        if self._rows is not None:
            return self._rows[index]
        where = f'{self.path}: item {index}'
        if self._framed is not None:
            return self._reader.decode(self._framed.item(index), where)
        start, end = self._offsets[index], self._offsets[index + 1]
        if self._reader.in_file_compression == 'sample':
            return self._reader.decode(inflate_item(self._map[start:end], where), where)
        return self._reader.decode(self._map[start:end], where)

    def samples(self, positions: Iterable[int]) -> Iterator[Any]:
        """The items at ``positions`` in order."""
        for index in positions:
            yield self[index]

    def close(self) -> None:
        """Release the memory map."""
        mapping = getattr(self, '_map', None)
        if mapping is not None and not isinstance(mapping, bytes):
            mapping.close()
        self._map = b''

    def __enter__(self) -> 'LitdataView':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LitdataFormat:
    """The ``litdata`` shard format (read-only: write datasets with litdata's ``optimize``)."""

    name = 'litdata'

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False,
               where: str = '') -> LitdataReader:
        """Validate one index entry and return its reader."""
        return LitdataReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    @property
    def writer(self) -> type:
        """No writer: litdata datasets are written by litdata."""
        raise NotImplementedError('streaming-litdata reads datasets written by litdata; write them with litdata, or '
                                  'convert them to MDS with "streaming convert litdata SRC OUT".')
