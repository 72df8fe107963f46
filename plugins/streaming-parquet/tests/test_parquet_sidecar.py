"""The Parquet sidecar index (``parquet-index.json``, written by ``streaming index DIR``): a stream reads it instead
of every footer and derives the very index the footers give; a file it does not describe (added, or replaced with
another size or etag) has its footer read; a malformed sidecar is refused naming it; a subdirectory's sidecar is no
data; and over S3 (moto on loopback) the CLI uploads it and a fresh dataset reads no footer."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from parquet_data import assert_row, write_parquet

from streaming_core import StreamingDataset
from streaming_core.cli import main
from streaming_core.plugin_api import IndexFormatError, ShardCorruptError
from streaming_core.reading.derived_index import DerivedIndexError, SourceFile, build_index, list_source
from streaming_parquet.builder import ParquetIndexBuilder
from streaming_parquet.sidecar import KIND, SIDECAR, usable_row
from tests.fixtures.s3 import moto_bucket


def _reader(directory: str, seen: list[str]) -> Any:
    def read(name: str, start: int, length: int) -> bytes:
        seen.append(name)
        with open(os.path.join(directory, name), 'rb') as handle:
            handle.seek(start)
            return handle.read(length)
    return read


def _build(directory: str, seen: list[str], **options: Any) -> dict[str, Any]:
    builder = ParquetIndexBuilder(**options)
    return builder.build(list_source(directory), _reader(directory, seen), where=directory)


def test_streaming_index_writes_a_sidecar_that_replaces_the_footer_reads(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    ids = write_parquet(data, files=3, rows=70, row_group=30)
    from_footers = _build(data, [])
    assert main(['index', data]) == 0
    assert SIDECAR in capsys.readouterr().out
    with open(os.path.join(data, SIDECAR)) as handle:
        sidecar = json.load(handle)
    assert sidecar['__kind__'] == KIND
    assert [(row['name'], row['size'], row['row_groups']) for row in sidecar['files']] == [
        (f'part-0000{i}.parquet', os.path.getsize(os.path.join(data, f'part-0000{i}.parquet')), [30, 30, 10])
        for i in range(3)]
    seen: list[str] = []
    assert _build(data, seen) == from_footers
    assert seen == [SIDECAR]  # one read, no footer
    # Options apply to the sidecar's rows as to footers: a projection and a file selection.
    projected: list[str] = []
    assert (_build(data, projected, columns=['text', 'id'], data_files='part-0000[12].parquet')
            == ParquetIndexBuilder(columns=['text', 'id'], data_files='part-0000[12].parquet').build(
                [f for f in list_source(data) if f.name != SIDECAR], _reader(data, []), where=data))
    assert projected == [SIDECAR]
    dataset = StreamingDataset(local=data, batch_size=2, shuffle=True, shuffle_seed=3)
    samples = list(dataset)
    assert sorted(s['id'] for s in samples) == ids
    for sample in samples:
        assert_row(sample)


def test_files_the_sidecar_does_not_describe_have_their_footers_read(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=2, rows=40, row_group=20)
    assert main(['index', data]) == 0
    write_parquet(data, files=1, rows=25, row_group=10, start=200, prefix='more')       # added later
    write_parquet(data, files=1, rows=55, row_group=20, start=0)                         # part-00000 replaced
    seen: list[str] = []
    index = _build(data, seen)
    assert sorted(set(seen)) == sorted([SIDECAR, 'more-00008.parquet', 'part-00000.parquet'])
    assert index == _build_without_sidecar(data)
    dataset = StreamingDataset(local=data, batch_size=1)
    assert len(dataset) == 55 + 40 + 25


def _build_without_sidecar(data: str) -> dict[str, Any]:
    files = [f for f in list_source(data) if f.name != SIDECAR]
    return ParquetIndexBuilder().build(files, _reader(data, []), where=data)


def test_a_row_is_used_only_for_the_same_size_and_etag() -> None:
    row = {'name': 'a.parquet', 'size': 10, 'etag': 'x', 'row_groups': [3, 0, 2], 'columns': [['id', 'int64']],
           'images': []}
    assert usable_row(row, SourceFile('a.parquet', 10, 'x')) == ([3, 0, 2], [['id', 'int64']], [])
    assert usable_row(row, SourceFile('a.parquet', 10, None)) is not None  # the store gives no etag: size decides
    assert usable_row(row, SourceFile('a.parquet', 11, 'x')) is None
    assert usable_row(row, SourceFile('a.parquet', 10, 'y')) is None
    assert usable_row(None, SourceFile('a.parquet', 10, 'x')) is None


def test_a_malformed_sidecar_is_refused_naming_it(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=1, rows=10, row_group=10)
    for text in ('not json', '{"files": []}', json.dumps({'__kind__': KIND, 'files': [{'name': 'x'}]})):
        with open(os.path.join(data, SIDECAR), 'w') as handle:
            handle.write(text)
        with pytest.raises(IndexFormatError, match=f'{SIDECAR}.*streaming index'):
            build_index(data)


def _stale_sidecar(tmp_path: Any, files: int, edit: Any) -> str:
    """A directory of ``files`` Parquet files indexed by ``streaming index``, whose sidecar ``edit(sidecar)`` then
    changes in place, as if the files had been replaced after it was written (same sizes, no etags)."""
    data = str(tmp_path / 'data')
    write_parquet(data, files=files, rows=60, row_group=30)
    assert main(['index', data]) == 0
    path = os.path.join(data, SIDECAR)
    with open(path) as handle:
        sidecar = json.load(handle)
    edit(sidecar)
    with open(path, 'w') as handle:
        json.dump(sidecar, handle)
    return data


def test_a_sidecar_claiming_other_row_groups_is_caught_when_the_file_opens(tmp_path: Any) -> None:
    """A file rewritten in place with the same size (and a store with no etags) is not noticed by the listing; the
    file's own footer disagrees with the sidecar when it is opened, and that is an error, never a wrong sample."""
    data = _stale_sidecar(tmp_path, 1, lambda sidecar: sidecar['files'][0].update(row_groups=[20, 40]))
    dataset = StreamingDataset(local=data, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r'part-00000\.parquet: row group 0 holds 30 rows, but the index '
                                                r'records 20'):
        list(dataset)


def test_a_sidecar_claiming_other_column_types_is_caught_when_the_file_opens(tmp_path: Any) -> None:
    """A file rewritten in place (same size) with a column of another type: the stale sidecar describes the old
    types, and the file's footer says otherwise when it is opened: an error naming the file and the column, never
    values of two types in one column."""
    def edit(sidecar: dict[str, Any]) -> None:
        columns = sidecar['files'][1]['columns']
        assert ['id', 'int64'] in columns
        columns = [[name, 'double' if name == 'id' else kind] for name, kind in columns]
        sidecar['files'] = [dict(row, columns=columns) for row in sidecar['files']]  # one schema: no drift error

    data = _stale_sidecar(tmp_path, 2, edit)
    dataset = StreamingDataset(local=data, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r"part-00000\.parquet: column 'id' is int64 in the file but double in "
                                                r"the index"):
        dataset[0]


def test_a_subdirectory_sidecar_is_not_data(tmp_path: Any) -> None:
    root = tmp_path / 'root'
    ids = write_parquet(str(root / 'train'), files=2, rows=20, row_group=10)
    assert main(['index', str(root / 'train')]) == 0
    assert sorted(s['id'] for s in StreamingDataset(local=str(root), batch_size=1)) == ids
    # A directory holding only a sidecar (its files elsewhere) is not detected as Parquet data.
    only = tmp_path / 'only'
    only.mkdir()
    (only / SIDECAR).write_bytes((root / 'train' / SIDECAR).read_bytes())
    with pytest.raises(DerivedIndexError, match='none of its 1 file'):
        StreamingDataset(local=str(only), batch_size=1)
    with pytest.raises(DerivedIndexError, match=r'has no index\.json and no \*\.parquet file for format=.parquet.'):
        StreamingDataset(local=str(only), batch_size=1, format='parquet')


BUCKET = 'sidecar-bucket'


@pytest.fixture
def s3_env(moto_server: Any, cloud_env: pytest.MonkeyPatch) -> Any:
    yield from moto_bucket(moto_server, cloud_env, BUCKET)


@pytest.mark.slow
def test_over_s3_the_cli_uploads_the_sidecar_and_a_fresh_dataset_reads_no_footer(
        tmp_path: Any, s3_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_core.reading.derived_index as derived
    data = str(tmp_path / 'data')
    ids = write_parquet(data, files=4, rows=30, row_group=10)
    for name in sorted(os.listdir(data)):
        s3_env.upload_file(os.path.join(data, name), BUCKET, f'pq/{name}')
    remote = f's3://{BUCKET}/pq'
    assert main(['index', remote]) == 0
    assert s3_env.head_object(Bucket=BUCKET, Key=f'pq/{SIDECAR}')['ContentLength'] > 0
    reads: list[str] = []
    real = derived.read_range

    def counting(url: str, *args: Any, **kwargs: Any) -> bytes:
        reads.append(url.rsplit('/', 1)[-1])
        return real(url, *args, **kwargs)

    monkeypatch.setattr(derived, 'read_range', counting)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2, shuffle=True)
    assert reads == [SIDECAR]
    assert len(dataset) == 120 and dataset.num_shards == 12
    assert sorted(s['id'] for s in dataset) == ids


def test_many_footers_without_a_sidecar_log_how_to_write_one(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from streaming_parquet import builder as builder_module
    monkeypatch.setattr(builder_module, 'SIDECAR_HINT_FILES', 3)
    data = str(tmp_path / 'data')
    write_parquet(data, files=3, rows=10, row_group=5)
    with caplog.at_level(logging.INFO, logger='streaming_parquet'):
        _build(data, [])
    assert [r.message for r in caplog.records if 'streaming index' in r.message] == [
        f'{data}: read the footers of 3 files. Run "streaming index {data}" to write {SIDECAR} beside them: a node '
        f'without this index then reads that one file instead.']
    caplog.clear()
    assert main(['index', data]) == 0
    with caplog.at_level(logging.INFO, logger='streaming_parquet'):
        _build(data, [])  # described by the sidecar: no footer read, no hint
    assert not [r for r in caplog.records if 'streaming index' in r.message]
