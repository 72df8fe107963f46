"""Arrow row footers read lazily (:mod:`streaming_litdata.arrow_rows`) give exactly the rows an eager
``table.to_pylist()`` of the same footer gives: on every golden dataset litdata 0.2.76 wrote (the Arrow ones and the
zstd ones), and on footers written here with what litdata's files do not show (several record batches, sliced
batches, nulls, ``large_*`` columns, empty values, zstd-compressed IPC buffers). Rows are new dicts on every access,
and the chunk's map closes after reading (no view of it is left behind)."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

import pytest

from streaming_core.errors import ShardCorruptError
from tests.deps import require

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
NAMES = ['mixed', 'rows', 'arrow', 'mixed-zstd', 'mixed-zstd-sample', 'mixed-zstd-chunk', 'arrow-zstd']
#: The golden datasets whose chunks carry their rows only as an Arrow footer.
ARROW_NAMES = {'arrow', 'arrow-zstd'}


def _eager(path: str, count: int) -> list[Any]:
    """The rows of a chunk's Arrow footer as the eager reader made them: a copy of the footer, ``to_pylist()``."""
    from streaming_litdata.arrow_rows import arrow_table
    with open(path, 'rb') as handle:
        data = handle.read()
    table, _, _, _ = arrow_table(data, len(data), count, path, copy=True)
    return table.to_pylist()


@pytest.mark.parametrize('name', NAMES)
def test_lazy_rows_equal_the_eager_rows_on_every_golden_dataset(name: str) -> None:
    require('pyarrow')
    from streaming_litdata import LitdataFormat, convert_index
    from streaming_litdata.convert import local_chunk
    from streaming_litdata.sizes import local_reader
    root = os.path.join(GOLDEN, name)
    with open(os.path.join(root, 'index.json'), 'rb') as handle:
        index = convert_index(handle.read(), f'{root}/index.json', local_reader(root))
    arrow_chunks = 0
    with tempfile.TemporaryDirectory() as scratch:  # whole-file zstd chunks are decompressed here
        for entry in index['shards']:
            path = local_chunk(root, entry, scratch)
            view = LitdataFormat().reader(entry, where=name).open([path])
            lazy = [view[i] for i in range(len(view))]
            if view._rows is not None:
                arrow_chunks += 1
                eager = _eager(path, len(view))
                assert lazy == eager
                assert [{k: type(v) for k, v in row.items()} for row in lazy] == \
                    [{k: type(v) for k, v in row.items()} for row in eager]
                lazy[0]['id'] = -1  # a caller mutating a row does not change what the chunk returns next
                assert view[0] == eager[0] and view[0] is not view[0]
            view.close()  # raises BufferError if a view of the map were still alive
            assert view._map == b''
    assert (arrow_chunks == len(index['shards'])) == (name in ARROW_NAMES)
    assert arrow_chunks in (0, len(index['shards']))


def _chunk_with_footer(tmp_path: Any, table: Any, **options: Any) -> tuple[str, int]:
    """A litdata chunk of ``table``'s rows stored only as an Arrow footer (as litdata writes it)."""
    import pyarrow as pa
    count = table.num_rows
    header = 4 + 4 * (count + 1)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(**options)) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    ipc = sink.getvalue().to_pybytes()
    data = struct.pack(f'<{count + 2}I', count, *([header] * (count + 1))) + ipc + struct.pack('<I', len(ipc)) + \
        b'LDARW01\0'
    path = str(tmp_path / f'chunk-{len(os.listdir(tmp_path))}.bin')
    with open(path, 'wb') as handle:
        handle.write(data)
    return path, len(data)


def _table() -> Any:
    """Rows with what litdata's golden footers do not show: several record batches (one of them a slice), nulls in
    a binary and a string column, large_* columns, empty values, lists and structs."""
    import pyarrow as pa
    rows = [{'jpg': bytes([i]) * (i % 7), 'name': f'n{i} \u00e9' if i % 5 else '', 'maybe': None if i % 3 == 0 else
             b'm' * i, 'note': None if i % 4 == 1 else f'note {i}', 'big': f'large {i}', 'raw': b'\x00\xff' * i,
             'labels': [i, i + 1], 'meta': {'k': i, 'v': f'v{i}'}, 'score': i / 3} for i in range(30)]
    schema = pa.schema([('jpg', pa.binary()), ('name', pa.string()), ('maybe', pa.binary()), ('note', pa.string()),
                        ('big', pa.large_string()), ('raw', pa.large_binary()), ('labels', pa.list_(pa.int64())),
                        ('meta', pa.struct([('k', pa.int64()), ('v', pa.string())])), ('score', pa.float64())])
    whole = pa.Table.from_pylist(rows, schema=schema)
    batches = [whole.slice(0, 7).to_batches()[0], pa.Table.from_pylist(rows[7:19], schema=schema).to_batches()[0],
               whole.slice(19, 11).to_batches()[0]]
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize('compression', [None, 'zstd'])
def test_lazy_rows_equal_to_pylist_on_batches_slices_nulls_and_compressed_buffers(tmp_path: Any,
                                                                                   compression: str | None) -> None:
    require('pyarrow')
    from streaming_core.reading.shard_entry import map_file
    from streaming_litdata.arrow_rows import arrow_rows
    table = _table()
    path, size = _chunk_with_footer(tmp_path, table, compression=compression)
    mapping = map_file(path, size)
    rows = arrow_rows(mapping, size, table.num_rows, path)
    expected = table.to_pylist()
    assert len(rows) == len(expected) == 30
    assert [rows[i] for i in range(len(rows))] == expected == _eager(path, table.num_rows)
    first = rows[1]  # a caller changing a row's list or struct in place changes no later read of it
    first['labels'].append(99)
    first['meta']['k'] = -1
    assert rows[1] == expected[1] and rows[1]['labels'] == [1, 2]
    with pytest.raises(IndexError, match='row 30 is out of range for 30 Arrow rows'):
        rows[30]
    mapping.close()  # nothing holds a view of the map


def test_a_damaged_footer_is_corrupt_naming_the_chunk(tmp_path: Any) -> None:
    require('pyarrow')
    from streaming_litdata.arrow_rows import arrow_rows
    table = _table()
    path, size = _chunk_with_footer(tmp_path, table)
    with open(path, 'rb') as handle:
        data = bytearray(handle.read())
    with pytest.raises(ShardCorruptError, match=r'chunk-0\.bin: the Arrow row footer holds 30 rows, not 31'):
        arrow_rows(bytes(data), size, 31, path)
    garbled = bytes(data[:200]) + bytes(size - 212) + bytes(data[-12:])
    with pytest.raises(ShardCorruptError, match=r'chunk-0\.bin: the Arrow row footer cannot be read'):
        arrow_rows(garbled, size, 30, path)
    with pytest.raises(ShardCorruptError, match=r'chunk-0\.bin: every item is empty and there is no Arrow row'):
        arrow_rows(bytes(data[:-1]) + b'X', size, 30, path)
    long = bytes(data[:-12]) + struct.pack('<I', size) + b'LDARW01\0'
    with pytest.raises(ShardCorruptError, match=r'claims \d+ bytes, more than the chunk'):
        arrow_rows(long, size, 30, path)
