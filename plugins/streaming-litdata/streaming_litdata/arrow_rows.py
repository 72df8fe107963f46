"""The rows of a litdata chunk stored as a trailing Arrow IPC file, built one at a time when read.

litdata 0.2.76 writes a chunk whose rows are plain values (bytes, ints, floats, str, lists and dicts of them) as
its classic header with every item empty, followed by an Arrow IPC *file* holding all rows, its length and a magic::

    [num_items u32][offsets u32 * (num_items + 1), all the header size][Arrow IPC file][length u32][LDARW01 NUL]

:func:`arrow_rows` opens that IPC file zero-copy over the chunk's memory map and returns :class:`ArrowRows`, which
decodes nothing up front: a flat ``binary``/``string`` column (the bulk of such rows, e.g. a JPEG's bytes) keeps
only the absolute ``(start, end)`` of each value in the map, taken from the Arrow offsets buffer, and ``rows[i]``
slices it out of the map; every other column (numbers, lists, structs, or a column with nulls) becomes one Python
list once (a list or dict is copied at every read, so a caller's in-place change reaches no later read). A shuffled
epoch spreads every chunk over every DataLoader worker, so each worker opens each chunk to read a fraction of its
rows: converting all rows to dicts at open (``table.to_pylist()``) cost each worker the whole chunk.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import ShardCorruptError

__all__ = ['ARROW_MAGIC', 'ArrowRows', 'arrow_rows', 'arrow_table']

#: The end of a chunk that carries its rows as an Arrow IPC file.
ARROW_MAGIC = b'LDARW01\0'
#: Column kinds of :class:`ArrowRows`: one Python list, slices of the map as bytes, or as UTF-8 text.
_LIST, _BYTES, _TEXT, _NESTED = 0, 1, 2, 3


def _footer_span(mapping: Any, size: int, path: str) -> tuple[int, int]:
    """``(start, end)`` of the Arrow IPC file in a ``size``-byte chunk.

    Raises:
        ShardCorruptError: naming ``path``, when the chunk has no Arrow footer or its length does not fit.
    """
    if size < 12 or bytes(mapping[size - 8:size]) != ARROW_MAGIC:
        raise ShardCorruptError(f'{path}: every item is empty and there is no Arrow row footer.')
    (length,) = struct.unpack_from('<I', mapping, size - 12)
    start = size - 12 - length
    if start < 0:
        raise ShardCorruptError(f'{path}: the Arrow row footer claims {length} bytes, more than the chunk.')
    return start, size - 12


def arrow_table(mapping: Any, size: int, count: int, path: str, *, copy: bool = False) -> tuple[Any, int, int, int]:
    """Open the Arrow row footer of a chunk.

    Args:
        mapping: The chunk's bytes (a memory map or ``bytes``).
        size: The chunk's size in bytes.
        count: The number of rows the index declares.
        path: The chunk file, for errors.
        copy: Copy the IPC file out of ``mapping`` first (the table then holds no view of it).

    Returns:
        ``(table, base, start, end)``: the ``pyarrow.Table``, the address of the buffer it was read from, and the
        span of that buffer in ``mapping``.

    Raises:
        ShardCorruptError: naming ``path``: no footer, an unreadable IPC file, or another row count than ``count``.
    """
    start, end = _footer_span(mapping, size, path)
    import pyarrow as pa
    source = pa.py_buffer(bytes(mapping[start:end]) if copy else memoryview(mapping)[start:end])
    try:
        table = pa.ipc.open_file(source).read_all()
    except (pa.ArrowException, OSError) as err:
        message = str(err)
        source = None  # the traceback must not keep a view of the map alive (it could not be closed)
        raise ShardCorruptError(f'{path}: the Arrow row footer cannot be read ({message}).') from None
    if table.num_rows != count:
        rows = table.num_rows
        table = source = None
        raise ShardCorruptError(f'{path}: the Arrow row footer holds {rows} rows, not {count}.')
    return table, source.address, start, end


def arrow_rows(mapping: Any, size: int, count: int, path: str, columns: Sequence[str] | None = None) -> ArrowRows:
    """The rows of a chunk's Arrow row footer, each built when it is read (see :class:`ArrowRows`); with
    ``columns``, only those columns, in that order (the others are never converted).

    Raises:
        ShardCorruptError: naming ``path``: no footer, an unreadable IPC file, another row count than ``count``, or
            a column of ``columns`` the footer lacks.
    """
    table, base, start, end = arrow_table(mapping, size, count, path)
    if columns is not None:
        missing = [name for name in columns if name not in table.column_names]
        if missing:
            names = list(table.column_names)
            table = None
            raise ShardCorruptError(f'{path}: the Arrow row footer has no column {missing} (its columns are '
                                    f'{names}), though the dataset\'s data_spec has those keys.')
    return ArrowRows(mapping, table, base, start, end, columns)


class ArrowRows:
    """The rows of a chunk's Arrow IPC file: ``rows[i]`` is a new dict of row ``i`` on every access.

    Flat ``binary``/``string`` columns (also ``large_*``) without nulls whose values lie in the chunk's map are
    sliced from ``mapping`` through their Arrow offsets (``bytes`` or ``str``, as ``to_pylist`` gives them); every
    other column becomes one Python list when the rows are built. The object keeps no reference to ``table``, so
    the caller may close ``mapping`` once it has dropped its own (``rows[i]`` then fails).

    Args:
        mapping: The chunk's bytes (a memory map or ``bytes``), which flat columns are sliced from.
        table: The ``pyarrow.Table`` read zero-copy from ``mapping[start:end]``.
        base: The address of the buffer ``table`` was read from (``mapping[start]``).
        start: Where that buffer starts in ``mapping``.
        end: Where it ends.
        columns: Only these columns, in this order (``None``: every column of ``table``).
    """

    def __init__(self, mapping: Any, table: Any, base: int, start: int, end: int,
                 columns: Sequence[str] | None = None) -> None:
        import pyarrow as pa
        self._map = mapping
        self._names: list[str] = list(table.column_names) if columns is None else list(columns)
        self._count: int = table.num_rows
        self._columns: list[tuple[int, list[Any], list[int] | None]] = []
        for name in self._names:
            column = table.column(name)
            kind = _TEXT if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) else \
                _BYTES if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type) else _LIST
            width = 8 if pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type) else 4
            spans = _spans(column, base, start, end, width) if kind != _LIST else None
            if spans is None:  # lists and structs are copied at every read: the decoded values are kept
                self._columns.append((_NESTED if pa.types.is_nested(column.type) else _LIST, column.to_pylist(), None))
            else:
                self._columns.append((kind, spans[0], spans[1]))

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self._count:
            raise IndexError(f'row {index} is out of range for {self._count} Arrow rows.')
        row: dict[str, Any] = {}
        mapping = self._map
        for name, (kind, first, second) in zip(self._names, self._columns):
            if kind == _LIST:
                row[name] = first[index]
            elif kind == _NESTED:
                row[name] = copy.deepcopy(first[index])
            elif kind == _BYTES:
                row[name] = bytes(mapping[first[index]:second[index]])  # type: ignore[index]
            else:
                row[name] = str(mapping[first[index]:second[index]], 'utf-8')  # type: ignore[index]
        return row


def _spans(column: Any, base: int, start: int, end: int, width: int) -> tuple[list[int], list[int]] | None:
    """The absolute ``(starts, ends)`` in the map of every value of a flat binary/string ``column`` read from the
    buffer at address ``base`` (``mapping[start:end]``), or None when a piece is not a plain slice of that buffer
    (nulls, or data that Arrow decompressed or copied elsewhere)."""
    starts, ends = [], []
    for piece in column.chunks:
        _, offsets, data = piece.buffers()
        if piece.null_count or offsets is None:
            return None
        if len(piece) == 0:
            continue
        held = data.size if data is not None else 0
        where = start + (data.address - base if held else 0)
        if not start <= where <= where + held <= end:
            return None
        values = np.frombuffer(offsets, dtype=f'<i{width}', count=len(piece) + 1, offset=piece.offset * width)
        values = values.astype(np.int64)
        if values[0] < 0 or values[-1] > held or np.any(np.diff(values) < 0):
            return None  # inconsistent offsets: leave them to Arrow
        values += where
        starts.append(values[:-1])
        ends.append(values[1:])
    if not starts:
        return [], []
    return np.concatenate(starts).tolist(), np.concatenate(ends).tolist()
