"""``ParquetStream(columns=...)``: only the requested columns are read (fewer bytes) and their values are equal to a
full read; an unknown column is refused naming the file and the available columns."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from parquet_data import assert_row, row, write_parquet

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.plugin_api import IndexFormatError
from streaming_parquet import ParquetStream
from streaming_parquet.reader import ParquetFormat

WIDE = 8


def _write_wide(directory: str, files: int = 2, rows: int = 120) -> None:
    """Files with an ``id`` and ``WIDE`` incompressible 4 KiB binary columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        ids = list(range(f * rows, (f + 1) * rows))
        table = {'id': pa.array(ids, pa.int64())}
        for c in range(WIDE):
            table[f'c{c}'] = pa.array([_blob(i, c) for i in ids], pa.binary())
        pq.write_table(pa.table(table), os.path.join(directory, f'wide-{f:05d}.parquet'), row_group_size=40)


def _blob(i: int, c: int) -> bytes:
    return random.Random(i * 100 + c).randbytes(4096)


def _read_bytes() -> int:
    """Bytes this process has read through read(2)/pread(2) so far (``rchar`` of /proc/self/io)."""
    with open('/proc/self/io') as handle:
        for line in handle:
            if line.startswith('rchar:'):
                return int(line.split()[1])
    raise AssertionError('no rchar in /proc/self/io')


def _bytes_to_read_all(dataset: StreamingDataset) -> tuple[int, list[dict[str, Any]]]:
    before = _read_bytes()
    samples = [dataset[i] for i in range(len(dataset))]
    return _read_bytes() - before, samples


@pytest.mark.skipif(not os.path.exists('/proc/self/io'), reason='needs /proc/self/io (Linux)')
def test_projection_reads_fewer_bytes_and_equal_values(tmp_path: Any) -> None:
    import time
    data = str(tmp_path / 'wide')
    _write_wide(data)
    written = time.monotonic()
    full = StreamingDataset(local=data, batch_size=4)
    projected = StreamingDataset(streams=[ParquetStream(local=data, columns=['c3', 'id'])], batch_size=4)
    assert len(projected) == len(full) == 240
    # Files read in place within 2 s of their last change have their footer's print compared at every open (a
    # rewrite within the clock's tick keeps their stat); the steady state is measured, after that window.
    time.sleep(max(0.0, 2.2 - (time.monotonic() - written)))
    _bytes_to_read_all(StreamingDataset(local=data, batch_size=4))  # warm the imports and the page cache
    full_bytes, full_rows = _bytes_to_read_all(full)
    projected_bytes, projected_rows = _bytes_to_read_all(projected)
    for whole, part in zip(full_rows, projected_rows):
        assert list(part) == ['c3', 'id']  # the requested order
        assert part == {'c3': whole['c3'], 'id': whole['id']} and part['c3'] == _blob(part['id'], 3)
    # 2 of 9 columns, the others 4 KiB per row each: far less than half of the full read.
    assert full_bytes > WIDE * 240 * 4096
    assert projected_bytes < full_bytes / 3, (projected_bytes, full_bytes)
    # Iteration and DataLoader workers (the configured builder is found in the workers too).
    loader = StreamingDataLoader(projected, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    got = sorted((s['id'], s['c3']) for batch in loader for s in batch)
    assert got == [(i, _blob(i, 3)) for i in range(240)]


def test_projection_identity_differs_and_works_from_a_remote(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_parquet(remote, files=2, rows=50, row_group=20)
    stream = ParquetStream(remote=remote, local=local, columns=['id', 'vec', 'meta'])
    dataset = StreamingDataset(streams=[stream], batch_size=2, shuffle=True, shuffle_seed=5)
    samples = list(dataset)
    assert sorted(s['id'] for s in samples) == list(range(100))
    for sample in samples:
        want = row(sample['id'])
        assert sorted(sample) == ['id', 'meta', 'vec'] and sample['meta'] == want['meta']
        assert sample['vec'].tolist() == want['vec'].tolist()
    assert dataset.streams[0].index_identity.startswith('derived:parquet[columns=id,vec,meta]:')
    assert "format_options={'columns': ['id', 'vec', 'meta']}" in repr(stream)
    # The same local directory read without projection: rebuilt, every column back.
    whole = StreamingDataset(streams=[Stream(remote=remote, local=local)], batch_size=2)
    assert whole.streams[0].index_identity.startswith('derived:parquet:')
    assert_row(whole[7])


def test_unknown_column_names_the_file_and_the_columns(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=1, rows=10, row_group=5)
    with pytest.raises(IndexFormatError) as err:
        StreamingDataset(streams=[ParquetStream(local=data, columns=['id', 'nope'])], batch_size=2)
    text = str(err.value)
    assert 'part-00000.parquet' in text and "'nope'" in text
    assert "['id', 'text', 'blob', 'score', 'vec', 'maybe', 'meta']" in text


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match='`columns` must be a non-empty list'):
        ParquetStream(local='/tmp/x', columns='id')
    with pytest.raises(ValueError, match='distinct'):
        ParquetStream(local='/tmp/x', columns=['id', 'id'])
    with pytest.raises(ValueError, match="format='mds'"):
        ParquetStream(local='/tmp/x', format='mds')


def test_schema_drift_outside_the_projection_is_allowed(tmp_path: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    data = str(tmp_path / 'data')
    os.makedirs(data)
    pq.write_table(pa.table({'id': [0, 1], 'x': [1.0, 2.0]}), os.path.join(data, 'a.parquet'))
    pq.write_table(pa.table({'id': [2, 3], 'x': ['s', 't']}), os.path.join(data, 'b.parquet'))
    with pytest.raises(IndexFormatError, match="column 'x'"):
        StreamingDataset(local=data, batch_size=2)
    dataset = StreamingDataset(streams=[ParquetStream(local=data, columns=['id'])], batch_size=2)
    assert [s for s in dataset] == [{'id': i} for i in range(4)]


def test_older_entries_without_optional_keys_still_read() -> None:
    entry = {'format': 'parquet', 'version': 2, 'samples': 3, 'compression': None, 'hashes': [], 'size_limit': None,
             'zip_data': None, 'raw_data': {'basename': 'a.parquet', 'bytes': 10, 'hashes': {}},
             'columns': [['id', 'int64']], 'row_group': 0}
    assert ParquetFormat().reader(entry).images == frozenset()
    per_file = {**entry, 'row_groups': [3]}  # the old one-entry-per-file layout: refused, never misread
    del per_file['row_group']
    with pytest.raises(IndexFormatError, match='old one-entry-per-file layout'):
        ParquetFormat().reader(per_file)
    with pytest.raises(IndexFormatError, match='"images" must list columns'):
        ParquetFormat().reader({**entry, 'images': ['other']})
