"""The ``parquet`` index builder: one index entry per file, from its footer read with ranged reads.

For each file, the last 64 KiB (or the whole file when smaller) are read in one request; a footer longer than that
costs a second request for exactly its bytes. The footer gives the schema, the row groups and their row counts; the
data pages are never read, so indexing 1,000 remote files downloads kilobytes per file. Every file must have the
first file's columns with the same types (in any order): otherwise the error names the file and the column.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError

__all__ = ['ParquetIndexBuilder', 'read_footer', 'entry_for', 'FOOTER_PROBE', 'MAGIC']

#: The bytes read from the end of each file first (most footers fit).
FOOTER_PROBE = 64 << 10
#: The Parquet magic number, at the start and the end of every file.
MAGIC = b'PAR1'
_THREADS = 8


def read_footer(name: str, size: int, read: Callable[[str, int, int], bytes], where: str) -> Any:
    """The ``pyarrow.parquet.FileMetaData`` of one file, from ranged reads of its end.

    Raises:
        ShardCorruptError: naming the file, when it is too short, lacks the magic number or its footer is unreadable.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    shown = f'{where}/{name}'
    if size < 12:
        raise ShardCorruptError(f'{shown} is not a Parquet file: {size} bytes, fewer than the 12 of an empty one '
                                f'(truncated?).')
    probe = min(size, FOOTER_PROBE)
    tail = read(name, size - probe, probe)
    if len(tail) != probe:
        raise ShardCorruptError(f'{shown}: read {len(tail)} of the last {probe} bytes of a {size}-byte file (the '
                                f'file changed or is truncated).')
    if tail[-4:] != MAGIC:
        raise ShardCorruptError(f'{shown} is not a Parquet file (or is truncated): it does not end with {MAGIC!r}.')
    (length,) = struct.unpack('<I', tail[-8:-4])
    if length + 12 > size:
        raise ShardCorruptError(f'{shown}: its footer claims {length} bytes, more than the file holds ({size}); the '
                                f'file is truncated or corrupt.')
    if length + 8 <= len(tail):
        footer = tail[len(tail) - 8 - length:]
    else:
        footer = read(name, size - 8 - length, length + 8)
        if len(footer) != length + 8:
            raise ShardCorruptError(f'{shown}: the footer read gave {len(footer)} of {length + 8} bytes.')
    try:
        return pq.read_metadata(pa.BufferReader(MAGIC + footer))
    except (pa.ArrowException, OSError, ValueError) as err:
        raise ShardCorruptError(f'{shown}: the Parquet footer cannot be read ({type(err).__name__}: {err}); the '
                                f'file is corrupt.') from None


def _columns(metadata: Any) -> list[list[str]]:
    schema = metadata.schema.to_arrow_schema()
    return [[field.name, str(field.type)] for field in schema]


def entry_for(name: str, size: int, metadata: Any) -> dict[str, Any]:
    """The ``parquet`` index entry of one file."""
    groups = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    return {'format': 'parquet', 'version': 2, 'samples': int(metadata.num_rows), 'compression': None,
            'hashes': [], 'size_limit': None, 'zip_data': None,
            'raw_data': {'basename': name, 'bytes': int(size), 'hashes': {}},
            'columns': _columns(metadata), 'row_groups': groups}


def _check_schema(first: Any, first_columns: list[list[str]], item: Any, columns: list[list[str]],
                  where: str) -> None:
    want = dict((name, kind) for name, kind in first_columns)
    have = dict((name, kind) for name, kind in columns)
    for name, kind in first_columns:
        if name not in have:
            raise IndexFormatError(f'Schema drift in {where}: {item.name} has no column {name!r}, which '
                                   f'{first.name} has ({kind}). Every Parquet file of a stream needs the same columns: '
                                   f'rewrite or move that file, or make it a separate stream.')
        if have[name] != kind:
            raise IndexFormatError(f'Schema drift in {where}: column {name!r} is {have[name]} in {item.name} but '
                                   f'{kind} in {first.name}. Every Parquet file of a stream needs the same column '
                                   f'types: rewrite or move that file, or make it a separate stream.')
    for name, kind in columns:
        if name not in want:
            raise IndexFormatError(f'Schema drift in {where}: {item.name} has a column {name!r} ({kind}) that '
                                   f'{first.name} lacks. Every Parquet file of a stream needs the same columns.')


class ParquetIndexBuilder:
    """Indexes ``*.parquet`` files: one ``parquet`` shard entry per file (its row groups recorded in the entry)."""

    name = 'parquet'
    patterns = ('*.parquet',)

    def build(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *, where: str) -> dict[str, Any]:
        """Read every file's footer (8 at a time) and return the index.

        Raises:
            IndexFormatError: the files' schemas differ (naming the file and the column).
            ShardCorruptError: a file is not a readable Parquet file (naming it).
        """
        files = list(files)
        if len(files) == 1:
            metas = [read_footer(files[0].name, files[0].size, read, where)]
        else:
            with ThreadPoolExecutor(max_workers=min(_THREADS, len(files))) as pool:
                metas = list(pool.map(lambda item: read_footer(item.name, item.size, read, where), files))
        entries = [entry_for(item.name, item.size, meta) for item, meta in zip(files, metas)]
        first_columns = entries[0]['columns'] if entries else []
        for item, entry in zip(files[1:], entries[1:]):
            _check_schema(files[0], first_columns, item, entry['columns'], where)
        for entry in entries:  # one column order for every file (the first file's)
            entry['columns'] = first_columns
        return {'shards': entries, 'version': 2}
