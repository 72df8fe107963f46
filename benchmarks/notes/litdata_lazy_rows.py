"""Prototype of a proposed change to ``plugins/streaming-litdata/streaming_litdata/reader.py`` (issue 17: ours behind
litdata with 2 DataLoader workers), kept here to measure it before it lands; see ``issue17-workers.md``.

``LitdataView._arrow_rows`` today reads a chunk's trailing Arrow IPC file (litdata 0.2.76 stores rows of plain values
there) by copying it out of the map and converting *every* row to a dict (``table.to_pylist()``) when the chunk is
opened. A shuffled epoch through W workers opens every chunk in every worker (a block-global shuffle spreads each
chunk over all workers), in new worker processes each epoch, so each worker decodes all rows to use 1/W of them.
``ArrowRows`` opens the IPC file zero-copy over the map and builds a row only when it is read: flat binary and
string columns are sliced from the map through their Arrow offsets; other columns become one list each, once.

``install()`` patches the class in this process (forked workers inherit it)::

    .venv/bin/python benchmarks/profile_workers.py DIR --setup benchmarks.notes.litdata_lazy_rows:install
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from streaming_core.plugin_api import ShardCorruptError


class ArrowRows:
    """The rows of a chunk's trailing Arrow IPC file, each built when it is read.

    Flat binary and string columns are sliced from the chunk's memory map through their Arrow offsets (the IPC
    file is opened zero-copy over the map, so nothing is copied or decoded at open); other columns (numbers,
    lists, structs) become one Python list each, once.
    """

    def __init__(self, mapping: Any, table: Any, base: int, footer_start: int, footer_end: int) -> None:
        import pyarrow as pa
        self._map = mapping
        self._names = list(table.column_names)
        self._count = table.num_rows
        self._columns: list[tuple[int, Any, Any]] = []  # (kind, values or starts, ends): 0 list, 1 bytes, 2 str
        for name in self._names:
            column = table.column(name)
            flat = (pa.types.is_binary(column.type), pa.types.is_string(column.type),
                    pa.types.is_large_binary(column.type), pa.types.is_large_string(column.type))
            spans = self._spans(column, base, footer_start, footer_end, 8 if (flat[2] or flat[3]) else 4) \
                if any(flat) else None
            if spans is None:
                self._columns.append((0, column.to_pylist(), None))
            else:
                self._columns.append((2 if (flat[1] or flat[3]) else 1, *spans))

    @staticmethod
    def _spans(column: Any, base: int, lo: int, hi: int, width: int) -> tuple[list[int], list[int]] | None:
        """Absolute ``(starts, ends)`` in the map of each value, or None when a piece is not a plain slice of it
        (nulls, compressed buffers, an empty data buffer)."""
        starts, ends = [], []
        for piece in column.chunks:
            _, offsets_buffer, data = piece.buffers()
            if piece.null_count or offsets_buffer is None or data is None:
                return None
            where = lo + data.address - base
            if not lo <= where <= where + data.size <= hi:
                return None
            offsets = np.frombuffer(offsets_buffer, dtype=f'<i{width}', count=len(piece) + 1,
                                    offset=piece.offset * width).astype(np.int64) + where
            starts.append(offsets[:-1])
            ends.append(offsets[1:])
        if not starts:
            return [], []
        return np.concatenate(starts).tolist(), np.concatenate(ends).tolist()

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = {}
        mapping = self._map
        for name, (kind, first, second) in zip(self._names, self._columns):
            if kind == 0:
                row[name] = first[index]
            elif kind == 1:
                row[name] = mapping[first[index]:second[index]]
            else:
                row[name] = mapping[first[index]:second[index]].decode('utf-8')
        return row


def _arrow_rows(self: Any, size: int, count: int) -> ArrowRows:
    from streaming_litdata.reader import ARROW_MAGIC
    if size < 12 or bytes(self._map[size - 8:size]) != ARROW_MAGIC:
        raise ShardCorruptError(f'{self.path}: every item is empty and there is no Arrow row footer.')
    (length,) = struct.unpack_from('<I', self._map, size - 12)
    start = size - 12 - length
    if start < 0:
        raise ShardCorruptError(f'{self.path}: the Arrow row footer claims {length} bytes, more than the chunk.')
    import pyarrow as pa
    footer = pa.py_buffer(memoryview(self._map)[start:size - 12])  # zero-copy over the map
    try:
        table = pa.ipc.open_file(footer).read_all()
    except (pa.ArrowException, OSError) as err:
        raise ShardCorruptError(f'{self.path}: the Arrow row footer cannot be read ({err}).') from None
    if table.num_rows != count:
        raise ShardCorruptError(f'{self.path}: the Arrow row footer holds {table.num_rows} rows, not {count}.')
    return ArrowRows(self._map, table, footer.address, start, size - 12)


def install() -> None:
    from streaming_litdata import reader
    reader.LitdataView._arrow_rows = _arrow_rows
