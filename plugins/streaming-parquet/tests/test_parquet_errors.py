"""Bad input for Parquet streams (schema drift, corrupt files, empty or mixed directories, format=), the index
builder hook for a third-party format, and the reader's bounded decoding of huge row groups."""

from __future__ import annotations

import os
import re
import types
from typing import Any

import pytest
from parquet_data import assert_row, write_parquet

from streaming_core import Stream, StreamingDataset
from streaming_core.errors import EmptyDatasetError, IndexFormatError, ShardCorruptError, UnknownNameError
from streaming_core.hookspecs import hookimpl
from streaming_core.reading.derived_index import DerivedIndexError
from streaming_core.testing import registered_plugin


def _table(**columns: Any) -> Any:
    import pyarrow as pa
    return pa.table(columns)


def test_schema_drift_names_the_file_and_the_column(tmp_path: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    data = str(tmp_path / 'drift')
    os.makedirs(data)
    pq.write_table(_table(a=pa.array([1, 2]), b=pa.array(['x', 'y'])), os.path.join(data, 'a.parquet'))
    pq.write_table(_table(a=pa.array([1.5, 2.5]), b=pa.array(['x', 'y'])), os.path.join(data, 'b.parquet'))
    with pytest.raises(IndexFormatError, match=r"column 'a' is double in b\.parquet but int64 in a\.parquet"):
        StreamingDataset(local=data, batch_size=1)
    pq.write_table(_table(a=pa.array([3])), os.path.join(data, 'b.parquet'))
    with pytest.raises(IndexFormatError, match=r"b\.parquet has no column 'b'"):
        StreamingDataset(local=data, batch_size=1)


def test_corrupt_files_raise_shard_corrupt_naming_them(tmp_path: Any) -> None:
    data = str(tmp_path / 'bad')
    write_parquet(data, files=2, rows=20, row_group=10)
    bad = os.path.join(data, 'part-00001.parquet')
    with open(bad, 'r+b') as handle:  # truncated: the footer is gone
        handle.truncate(os.path.getsize(bad) - 20)
    with pytest.raises(ShardCorruptError, match='part-00001.parquet'):
        StreamingDataset(local=data, batch_size=1)
    # Footer intact, data pages overwritten: found when the row group is decoded.
    write_parquet(data, files=2, rows=20, row_group=10)
    with open(bad, 'r+b') as handle:
        handle.seek(4)
        handle.write(b'\xff' * 200)
    dataset = StreamingDataset(local=data, batch_size=1)
    assert_row(dataset[0])
    with pytest.raises(ShardCorruptError, match='part-00001.parquet'):
        dataset[25]


def test_a_damaged_page_with_a_checksum_fails_naming_the_file(tmp_path: Any, monkeypatch: Any) -> None:
    """A file written with page checksums and damaged inside a data page (same size, footer intact) is refused
    when the page is read, never decoded into a wrong value (pyarrow checks no checksum unless asked)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    data = str(tmp_path / 'crc')
    os.makedirs(data)
    texts = [f'row {i} ' * 8 for i in range(400)]
    path = os.path.join(data, 'part-0.parquet')
    pq.write_table(pa.table({'id': list(range(400)), 'text': texts}), path, write_page_checksum=True,
                   use_dictionary=False, compression='none')
    raw = bytearray(open(path, 'rb').read())
    spot = raw.index(texts[200].encode())  # inside the plain-encoded text page: a same-length change
    raw[spot] ^= 0x01
    open(path, 'wb').write(bytes(raw))
    dataset = StreamingDataset(local=data, batch_size=1)
    with pytest.raises(ShardCorruptError, match=r'part-0\.parquet.*CRC.*STREAMING_PARQUET_PAGE_CHECKSUMS=0'):
        dataset[200]
    # For files whose writer wrote wrong checksums, the check can be skipped (the byte changed is then read).
    monkeypatch.setenv('STREAMING_PARQUET_PAGE_CHECKSUMS', '0')
    unchecked = StreamingDataset(local=data, batch_size=1)
    assert unchecked[200]['text'] != texts[200] and unchecked[199]['text'] == texts[199]


def test_spark_leftovers_are_not_read_as_data(tmp_path: Any) -> None:
    """A Spark output directory: part files, ``_SUCCESS``, a failed attempt's copy under ``_temporary/`` and a Delta
    log's checkpoint. The copy's rows were read too (repeated, silently); writers' artifacts are left out."""
    import shutil

    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq
    data = str(tmp_path / 'spark-out')
    os.makedirs(data)
    for part in range(2):
        ids = list(range(part * 50, part * 50 + 50))
        pq.write_table(pa.table({'id': ids}), os.path.join(data, f'part-0000{part}-abc.snappy.parquet'))
    attempt = os.path.join(data, '_temporary', '0', '_temporary', 'attempt_202611270000_0001_m_000001_1')
    os.makedirs(attempt)
    shutil.copy(os.path.join(data, 'part-00001-abc.snappy.parquet'), attempt)
    open(os.path.join(data, '_SUCCESS'), 'w').close()
    delta_log = os.path.join(data, '_delta_log')
    os.makedirs(delta_log)
    shutil.copy(os.path.join(data, 'part-00000-abc.snappy.parquet'), os.path.join(delta_log, '0.checkpoint.parquet'))
    dataset = StreamingDataset(local=data, batch_size=1)
    assert sorted(int(s['id']) for s in dataset) == list(range(100))
    assert pads.dataset(data).count_rows() == 100  # what pyarrow reads of the same directory
    # Other names with one leading underscore are data, as Hugging Face datasets reads them.
    pq.write_table(pa.table({'id': [100, 101]}), os.path.join(data, '_extra.parquet'))
    assert sorted(int(s['id']) for s in StreamingDataset(local=data, batch_size=1)) == list(range(102))


def test_empty_or_unindexable_directory_says_what_it_found(tmp_path: Any) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    empty = str(tmp_path / 'empty')
    os.makedirs(empty)
    with pytest.raises(DerivedIndexError, match='no index.json and no files'):
        StreamingDataset(local=empty, batch_size=1)
    rowless = str(tmp_path / 'rowless')
    os.makedirs(rowless)
    pq.write_table(_table(a=pa.array([], pa.int64())), os.path.join(rowless, 'a.parquet'))
    with pytest.raises(EmptyDatasetError, match=r'the parquet files of .*rowless hold no rows') as found:
        StreamingDataset(local=rowless, batch_size=1)
    assert 'index.json' not in str(found.value).split(';')[0]  # there is none to name
    twice = str(tmp_path / 'twice')
    os.makedirs(twice)
    pq.write_table(pa.Table.from_arrays([pa.array([1]), pa.array(['x'])], names=['x', 'x']),
                   os.path.join(twice, 'a.parquet'))
    with pytest.raises(IndexFormatError, match=r"a\.parquet has several columns named 'x'"):
        StreamingDataset(local=twice, batch_size=1)
    pq.write_table(pa.Table.from_arrays([pa.array([1, 2]), pa.array(['x', 'y']), pa.array(['z', 'w'])],
                                        names=['id', 'x', 'x']), os.path.join(twice, 'a.parquet'))
    left_out = StreamingDataset(local=twice, columns=['id'], batch_size=1)
    assert [left_out[i] for i in range(2)] == [{'id': 1}, {'id': 2}]  # columns= leaves the pair out
    other = str(tmp_path / 'other')
    os.makedirs(other)
    open(os.path.join(other, 'notes.txt'), 'w').write('hello')
    with pytest.raises(DerivedIndexError, match=r'notes\.txt.*format=NAME'):
        StreamingDataset(local=other, batch_size=1)


class _LinesBuilder:
    """A third-party index builder for ``*.lines`` files (only the choice between builders is tested here)."""

    name = 'lines'
    patterns = ('*.lines',)

    def build(self, files: Any, read: Any, *, where: str) -> dict[str, Any]:
        raise AssertionError('not reached in these tests')


def _plugin(**hooks: Any) -> types.ModuleType:
    module = types.ModuleType('lines_plugin')
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    return module


def test_mixed_formats_need_format_and_format_selects(tmp_path: Any) -> None:
    data = str(tmp_path / 'mixed')
    write_parquet(data, files=1, rows=12)
    open(os.path.join(data, 'extra.lines'), 'w').write('a\nb\n')
    plugin = _plugin(register_index_builders=lambda registry: registry.add('lines', _LinesBuilder()))
    with registered_plugin(plugin, 'lines-plugin'):
        with pytest.raises(DerivedIndexError, match=r"several formats: 1 lines file.*1 parquet file.*Pass format="):
            StreamingDataset(local=data, batch_size=1)
        dataset = StreamingDataset(streams=[Stream(local=data, format='parquet')], batch_size=1)
        assert len(dataset) == 12
        assert len(StreamingDataset(local=data, format='parquet', batch_size=1)) == 12
    with pytest.raises(UnknownNameError, match="(?s)format='nope'.*Installed index builder names: .*parquet"):
        StreamingDataset(streams=[Stream(local=data, format='nope')], batch_size=1)
    with pytest.raises(ValueError, match='format'):
        Stream(local=data, format='')


def test_huge_row_groups_are_decoded_in_bounded_slices(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_parquet.reader as reader_module
    monkeypatch.setattr(reader_module, 'SLICE_ROWS', 16)
    data = str(tmp_path / 'huge')
    write_parquet(data, files=1, rows=100, row_group=100)
    dataset = StreamingDataset(local=data, batch_size=1)
    for i in (99, 0, 17, 50, 33, 98, 1):
        assert_row(dataset[i])
    assert [s['id'] for s in dataset] == list(range(100))
    # The view itself: slices of at most SLICE_ROWS rows, as many kept as the byte budget allows (at least one).
    import json

    from streaming_core.common.paths import state_dir
    from streaming_core.reading.derived_index import DERIVED_INDEX_NAME
    from streaming_parquet.reader import ParquetFormat
    entry = json.loads(open(os.path.join(state_dir(data), DERIVED_INDEX_NAME)).read())['shards'][0]
    view = ParquetFormat().reader(entry).open([os.path.join(data, 'part-00000.parquet')])
    for i in (5, 40, 90, 20, 70):
        assert view[i]['id'] == i
    held = reader_module.decoded_cache.keys_of(view._token)
    assert sorted(held) == [(0, 0), (0, 1), (0, 2), (0, 4), (0, 5)]
    monkeypatch.setenv('STREAMING_PARQUET_DECODED_BYTES', '1')
    assert view[99]['id'] == 99 and reader_module.decoded_cache.keys_of(view._token) == [(0, 6)]
    view.close()
    assert reader_module.decoded_cache.keys_of(view._token) == []


@pytest.mark.parametrize('seed', range(4))
def test_slices_are_exact_when_pyarrow_gives_shorter_batches(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                             seed: int) -> None:
    """pyarrow's batches hold *at most* the rows asked for (fewer where the decoded values would pass 2 GiB: a row
    group of wide strings): a slice must still start at its own first row, or rows are served in the wrong place."""
    import random

    import pyarrow.parquet as pq

    import streaming_parquet.reader as reader_module
    monkeypatch.setattr(reader_module, 'SLICE_ROWS', 16)
    rng = random.Random(seed)
    real = pq.ParquetFile.iter_batches

    def shorter(self: Any, batch_size: int = 65536, **kwargs: Any) -> Any:  # as pyarrow does for huge values
        for batch in real(self, batch_size=batch_size, **kwargs):
            offset = 0
            while offset < batch.num_rows:
                rows = min(rng.randint(1, batch_size), batch.num_rows - offset)
                yield batch.slice(offset, rows)
                offset += rows

    monkeypatch.setattr(pq.ParquetFile, 'iter_batches', shorter)
    data = str(tmp_path / 'huge')
    write_parquet(data, files=1, rows=100, row_group=100)
    dataset = StreamingDataset(local=data, batch_size=1)
    order = list(range(100))
    rng.shuffle(order)
    for i in order:
        assert dataset[i]['id'] == i
        assert_row(dataset[i])
    assert [s['id'] for s in StreamingDataset(local=data, batch_size=1)] == list(range(100))


def test_a_shuffled_epoch_decodes_each_row_group_once(tmp_path: Any) -> None:
    import streaming_parquet.reader as reader_module
    data = str(tmp_path / 'data')
    write_parquet(data, files=4, rows=200, row_group=20)  # 40 row groups
    dataset = StreamingDataset(local=data, batch_size=8, shuffle=True, shuffle_seed=2)
    before = reader_module.decoded_cache.decodes
    assert sorted(s['id'] for s in dataset) == list(range(800))
    assert reader_module.decoded_cache.decodes - before == 40


def test_a_permanent_error_reading_the_files_is_reported_as_itself(tmp_path: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # A store that lists the directory but refuses to serve a file (a 403 on one footer) reports that refusal; only a
    # store that cannot list at all (a web server) makes the dataset's index "just missing".
    from streaming_core.errors import PermanentStorageError, RemoteNotFoundError
    from streaming_core.reading import derived_index
    data = str(tmp_path / 'remote')
    write_parquet(data, files=2, rows=10, row_group=5)

    def refused(url: str, *args: Any, **kwargs: Any) -> bytes:
        raise PermanentStorageError(f'GET {url}: 403 Forbidden')

    monkeypatch.setattr(derived_index, 'read_range', refused)
    with pytest.raises(PermanentStorageError, match=r'part-00000\.parquet: 403 Forbidden') as caught:
        StreamingDataset(remote=data, local=str(tmp_path / 'cache'), batch_size=2)
    assert not isinstance(caught.value, RemoteNotFoundError) and 'index.json' not in str(caught.value)


def _ten_rows(path: str, base: int) -> None:
    """Ids ``base..base+9`` in row groups of 2, uncompressed: a rewrite with another base has the same size."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({'id': pa.array(range(base, base + 10), pa.int64())}), path, compression='none',
                   use_dictionary=False, write_statistics=False, row_group_size=2)


def test_a_file_rewritten_in_place_while_read_is_never_mixed_in(tmp_path: Any) -> None:
    """A directory read in place, its file overwritten with bytes of the same size while the job reads it (``cp``
    onto it): the row groups not yet decoded must not come from the new bytes under the old footer and index."""

    data = tmp_path / 'data'
    data.mkdir()
    target = str(data / 'a.parquet')

    _ten_rows(target, 0)
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)

    def overwrite(target: str, new: str) -> None:
        assert os.path.getsize(new) == os.path.getsize(target)
        with open(new, 'rb') as source, open(target, 'r+b') as old:
            old.write(source.read())

    # Whichever check sees it first: the one before a row group's view opens (by the stat, or by the file's print when
    # the overwrite kept the modification time: within the clock tick of the file's writing, on a loaded machine), or
    # the one before a slice of an open view is decoded.
    _read_overwriting_after_the_first(dataset, target, str(tmp_path / 'new.parquet'), overwrite,
                                      'a.parquet was (rewritten in place|replaced)')


def _read_overwriting_after_the_first(dataset: StreamingDataset, target: str, new: str, overwrite: Any,
                                      error: str) -> None:
    """Iterate ``dataset`` (ten rows of ``target``), the file overwritten by ``overwrite(target, new)`` with ten rows
    from 700 after the first row: the job stops with a ``DatasetVersionError`` matching ``error``, or never reached a
    check because prefetching had decoded every row group before the overwrite (seen in a run of the whole suite on
    a loaded machine). Never a mix: only the old file's rows, in order."""
    from streaming_core.errors import DatasetVersionError
    read = []
    try:
        for sample in dataset:
            read.append(sample['id'])
            if len(read) == 1:
                _ten_rows(new, 700)
                overwrite(target, new)
    except DatasetVersionError as err:
        assert re.search(error, str(err)), err
    else:
        assert read == list(range(10)), read  # all decoded before the overwrite
    assert read == list(range(len(read))) and read


def test_symbolic_links_in_a_directory_are_never_a_silent_gap(tmp_path: Any, caplog: Any) -> None:
    """A linked subdirectory is not followed (it may lead anywhere: a virtualenv, the root) and a warning names it;
    a broken link (a volume not mounted) fails naming it instead of leaving its rows out; hidden ones are ignored."""
    from streaming_core.reading.derived_index import DerivedIndexError
    data = tmp_path / 'data'
    write_parquet(str(data), files=1, rows=4, start=0, prefix='a')
    outside = tmp_path / 'outside'
    write_parquet(str(outside), files=1, rows=4, start=4, prefix='b')
    os.symlink(outside, data / 'more')
    os.symlink('/usr', data / '.venv')  # hidden: neither listed nor named
    os.symlink('/nonexistent/lock', data / '.#a-00000.parquet')  # an editor's lock file: hidden, a broken link
    with caplog.at_level('WARNING', logger='streaming_core.reading.derived_index'):
        dataset = StreamingDataset(local=str(data), batch_size=1)
    assert sorted(sample['id'] for sample in dataset) == list(range(4))
    assert "'more' is a link to a directory, not followed" in caplog.text and '.venv' not in caplog.text
    os.symlink('/nonexistent/volume/d.parquet', data / 'd.parquet')
    with pytest.raises(DerivedIndexError, match=r"'d.parquet' is a broken symbolic link \(to '/nonexistent"):
        StreamingDataset(local=str(data), batch_size=1)
    with pytest.raises(DerivedIndexError, match='broken symbolic link'):  # a remote directory on a local disk too
        StreamingDataset(remote=str(data), local=str(tmp_path / 'cache'), batch_size=1)


def test_an_open_row_group_view_refuses_to_decode_a_file_rewritten_in_place(tmp_path: Any) -> None:
    """The check before a slice is decoded, on its own: a view opened (footer read) before the overwrite."""
    import json

    from streaming_core.common.paths import state_dir
    from streaming_core.errors import DatasetVersionError
    from streaming_core.reading.derived_index import DERIVED_INDEX_NAME
    from streaming_parquet.reader import ParquetFormat
    data = tmp_path / 'data'
    data.mkdir()
    target = str(data / 'a.parquet')

    _ten_rows(target, 0)
    assert len(StreamingDataset(local=str(data), batch_size=1)) == 10
    entries = json.loads(open(os.path.join(state_dir(str(data)), DERIVED_INDEX_NAME)).read())['shards']
    views = [ParquetFormat().reader(entry).open([target]) for entry in entries[:2]]
    assert views[0][1]['id'] == 1  # decoded before the overwrite
    _ten_rows(str(tmp_path / 'new.parquet'), 700)
    with open(tmp_path / 'new.parquet', 'rb') as new, open(target, 'r+b') as old:
        old.write(new.read())
    os.utime(target, ns=(os.stat(target).st_atime_ns, os.stat(target).st_mtime_ns + 1))  # a clock that moved
    assert views[0][0]['id'] == 0  # already decoded: the old version, consistently
    with pytest.raises(DatasetVersionError, match='a.parquet was rewritten in place while this job read it'):
        views[1][0]
    for view in views:
        view.close()


def test_an_upper_case_extension_is_not_read_and_a_warning_says_so(tmp_path: Any, caplog: Any) -> None:
    """``PART-1.PARQUET`` beside ``part-0.parquet`` (a Windows tool, a renamed export): formats are told by their
    extensions in lower case (``RAW.TAR`` beside Parquet files is no second format), so it is not read, and a
    warning names it."""
    data = tmp_path / 'data'
    write_parquet(str(data), files=2, rows=5)
    first, second = sorted(name for name in os.listdir(data) if name.endswith('.parquet'))
    os.rename(data / second, data / second.upper())
    with caplog.at_level('WARNING', logger='streaming_core.reading.derived_index'):
        dataset = StreamingDataset(local=str(data), batch_size=1)
    assert sorted(sample['id'] for sample in dataset) == list(range(5))
    assert f'{second.upper()} is not read as parquet' in caplog.text


@pytest.mark.parametrize('how', ['within-the-clock-tick', 'modification-time-put-back'])
def test_a_rewrite_the_stat_cannot_show_is_never_mixed_in(tmp_path: Any, how: str) -> None:
    """A file of a directory read in place, overwritten in place with bytes of the same size while the job reads it,
    keeping its size and modification time: within the coarse clock's tick of its last write (a fresh-clone run read
    rows 0, 1, 702, 703: two of them from the new bytes under the old footer), or with its modification time put back
    (``cp -p``, ``touch -r``) later. The file's tail is compared when the stat cannot tell, and the job stops: by the
    open view (against the tail it opened), or before a later row group's view opens (against the print of the tail
    taken with the listing; a later fresh-clone run read 0, 1, 702... with only the first check), or by the
    listing's check of the file before it is opened (its change time moved: a fresh-clone run stopped there)."""
    import time

    data = tmp_path / 'data'
    data.mkdir()
    target = str(data / 'a.parquet')
    _ten_rows(target, 0)
    if how == 'modification-time-put-back':  # an old file: outside the racy window
        old = time.time_ns() - 3_600 * 10**9
        os.utime(target, ns=(old, old))
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    # By the open view's check, or by the check before a view opens.
    _read_overwriting_after_the_first(dataset, target, str(tmp_path / 'new.parquet'), _overwrite_keeping_the_stat,
                                      'a.parquet was (rewritten in place (while this job read it|with the same size)'
                                      '|.* after this job\'s index was derived from the listing)')


def _overwrite_keeping_the_stat(target: str, new: str) -> None:
    """Overwrite ``target`` in place with the bytes of ``new`` (same size), then put its modification time back."""
    before = os.stat(target)
    with open(new, 'rb') as source, open(target, 'r+b') as old_file:
        old_file.write(source.read())
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(target).st_size, os.stat(target).st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def _aged_ten_rows(directory: Any, name: str = 'a.parquet', base: int = 0) -> str:
    """``_ten_rows`` at ``directory/name``, its modification time an hour back (outside the racy window)."""
    import time
    os.makedirs(directory, exist_ok=True)
    target = str(os.path.join(directory, name))
    _ten_rows(target, base)
    old = time.time_ns() - 3_600 * 10**9
    os.utime(target, ns=(old, old))
    return target


def _two_versions(data: Any, write: Any, base: int) -> tuple[str, bytes, bytes]:
    """``write(path, first id)`` of ``data/a.parquet`` from id 0 and of its next version from ``base``, beside
    ``data`` (``data/../new.parquet``): ``(the file's path, its bytes, the next version's bytes)``."""
    os.makedirs(data, exist_ok=True)
    target, new = str(data / 'a.parquet'), str(data.parent / 'new.parquet')
    write(target, 0)
    write(new, base)
    return target, open(target, 'rb').read(), open(new, 'rb').read()


def _fresh_process_error(dataset: StreamingDataset) -> bytes:
    """What a new interpreter that unpickles ``dataset`` and reads its sample 4 writes to stderr (it must fail)."""
    import pickle
    import subprocess
    import sys
    fresh = subprocess.run(
        [sys.executable, '-c', 'import pickle, sys; dataset = pickle.load(sys.stdin.buffer); print(dataset[4]["id"])'],
        input=pickle.dumps(dataset), capture_output=True, timeout=120)
    assert fresh.returncode != 0, fresh.stdout
    return fresh.stderr


@pytest.mark.parametrize('racy', [False, True], ids=['old-file', 'written-moments-before'])
def test_a_row_group_first_opened_after_a_rewrite_the_stat_cannot_show_is_refused(tmp_path: Any, racy: bool) -> None:
    """The case the view's own check cannot see (a fresh-clone run read rows 0, 1, 702, 703...): the view of a later
    row group opened only after the file was overwritten with its size and modification time put back, so it parsed
    the new footer and compared the new bytes with themselves. Random access, after the first row group was read:
    the print of the file's tail taken when the index was derived tells the versions apart, in this process and in a
    fresh one (a DataLoader worker, another rank)."""
    import time

    from streaming_core.errors import DatasetVersionError
    data = tmp_path / 'data'
    data.mkdir()
    target = str(data / 'a.parquet')
    _ten_rows(target, 0)
    if not racy:
        old = time.time_ns() - 3_600 * 10**9
        os.utime(target, ns=(old, old))
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    assert [dataset[0]['id'], dataset[1]['id']] == [0, 1]
    _ten_rows(str(tmp_path / 'new.parquet'), 700)
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))
    with pytest.raises(DatasetVersionError, match='a.parquet was rewritten in place with the same size and modif'):
        dataset[2]
    with pytest.raises(DatasetVersionError, match='rewritten in place'):
        list(dataset)
    stderr = _fresh_process_error(dataset)
    assert b'DatasetVersionError' in stderr, stderr[-2000:]


def test_a_chmod_alone_stops_nothing(tmp_path: Any) -> None:
    """The change time moves with a ``chmod`` too: the tail's print is compared and the job reads on."""
    data = tmp_path / 'data'
    target = _aged_ten_rows(data)
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    assert dataset[0]['id'] == 0
    os.chmod(target, 0o600)
    assert [sample['id'] for sample in dataset] == list(range(10))


def test_a_path_remote_rewritten_keeping_its_stat_is_not_copied_under_the_old_index(tmp_path: Any) -> None:
    """The same rewrite of a file of a path remote (a mounted directory) before its first download: the copy is
    refused by the download's check, never served under the index derived from the old bytes."""

    from streaming_core.errors import DatasetVersionError
    remote = tmp_path / 'remote'
    target = _aged_ten_rows(remote)
    dataset = StreamingDataset(remote=str(remote), local=str(tmp_path / 'cache'), batch_size=1, shuffle=False)
    assert len(dataset) == 10
    _ten_rows(str(tmp_path / 'new.parquet'), 700)
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))
    with pytest.raises(DatasetVersionError, match='rewritten in place with the same size'):
        dataset[0]
    assert not os.path.exists(tmp_path / 'cache' / 'a.parquet')


def test_a_wide_file_rewritten_keeping_its_stat_is_refused(tmp_path: Any) -> None:
    """A table of 121 columns (with statistics, pyarrow's default): its footer passes 4 KiB, so its last 4 KiB are
    schema metadata alone, equal in both versions (a review read rows 0, 1, 702... under the old index when the last
    4 KiB were printed). The print covers the whole footer, where the row groups' statistics differ."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming_core.errors import DatasetVersionError

    def write(path: str, base: int) -> None:
        columns = {'id': pa.array(range(base, base + 10), pa.int64())}
        columns.update({f'feature_{j:03d}': pa.array([float(base + i + j) for i in range(10)], pa.float64())
                        for j in range(120)})
        pq.write_table(pa.table(columns), path, compression='none', use_dictionary=False, row_group_size=2)

    data = tmp_path / 'data'
    target, old_bytes, new_bytes = _two_versions(data, write, 700)
    assert len(old_bytes) == len(new_bytes) and old_bytes[-4096:] == new_bytes[-4096:] and old_bytes != new_bytes
    old = time.time_ns() - 3_600 * 10**9
    os.utime(target, ns=(old, old))
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False, columns=['id'])
    assert [dataset[0]['id'], dataset[1]['id']] == [0, 1]
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))
    with pytest.raises(DatasetVersionError, match='rewritten in place with the same size'):
        dataset[2]


def test_a_chmod_while_the_index_is_built_stops_nothing(tmp_path: Any, monkeypatch: Any) -> None:
    """A file's change time moved between its listing and its print (a chmod or a hard link while the index is
    built): its data did not change, so its print is taken, and the job reads every row (a review saw every later
    open refused with a message about bytes that were never compared)."""

    from streaming_core.reading import derived_index
    data = tmp_path / 'data'
    target = _aged_ten_rows(data)
    taking = derived_index.take_prints

    def with_a_chmod_first(*args: Any) -> Any:
        os.chmod(target, 0o600)
        return taking(*args)

    monkeypatch.setattr(derived_index, 'take_prints', with_a_chmod_first)
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    assert [sample['id'] for sample in dataset] == list(range(10))
    assert dataset[7]['id'] == 7


def test_a_job_whose_listing_record_was_pruned_is_still_checked(tmp_path: Any) -> None:
    """Five newer versions of the directory's index built while a job runs (another file's metadata changed, each
    version kept by a construction) prune the record of the job's own version. Its forked workers inherit the
    entries and prints read when the dataset was created, and stop at the rewrite (a review's forked worker read rows
    700... unchecked); a fresh process, which cannot read them any more, refuses to read unchecked."""
    import multiprocessing

    from streaming_core.errors import DatasetVersionError
    data = tmp_path / 'data'
    target = _aged_ten_rows(data)
    _ten_rows(str(data / 'b.parquet'), 100)
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    identities = {dataset.streams[0].index_identity}
    for number in range(5):
        os.chmod(data / 'b.parquet', 0o600 if number % 2 == 0 else 0o644)
        identities.add(StreamingDataset(local=str(data), batch_size=1).streams[0].index_identity)
    assert len(identities) == 6
    _ten_rows(str(tmp_path / 'new.parquet'), 700)
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))

    def read_in_a_fork(queue: Any) -> None:
        try:
            queue.put([dataset[i]['id'] for i in range(10)])
        except DatasetVersionError as err:
            queue.put(str(err))

    queue = multiprocessing.get_context('fork').Queue()
    child = multiprocessing.get_context('fork').Process(target=read_in_a_fork, args=(queue,))
    child.start()
    found = queue.get(timeout=120)
    child.join(60)
    assert isinstance(found, str) and 'rewritten in place' in found, found
    stderr = _fresh_process_error(dataset)
    assert b'DatasetVersionError' in stderr and b'is gone' in stderr, stderr[-2000:]


def test_an_open_view_of_a_file_whose_footer_passes_64_kib_sees_a_rewrite(tmp_path: Any) -> None:
    """The open view's own check, on a table of 1,200 flag columns (a footer of about 370 KB, whose last 64 KiB are
    schema metadata alone): a view opened before a rewrite that kept the size and modification time must not decode
    its next slice from the new bytes (a review read row 733000 at row 33000 when the view compared its last 64 KiB).
    It compares the whole footer and the 4 KiB before it."""
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming_core.errors import DatasetVersionError
    rows = 40_000

    def write(path: str, base: int) -> None:
        columns = {'id': pa.array(range(base, base + rows), pa.int64())}
        flags = pa.array([False] * rows, pa.bool_())
        columns.update({f'feature_column_with_a_rather_long_descriptive_name_{j:04d}': flags for j in range(1200)})
        pq.write_table(pa.table(columns), path, compression='none', use_dictionary=False, row_group_size=rows)

    data = tmp_path / 'data'
    target, old_bytes, new_bytes = _two_versions(data, write, 700_000)
    assert int.from_bytes(old_bytes[-8:-4], 'little') > 1 << 16 and old_bytes[-65536:] == new_bytes[-65536:]
    del old_bytes, new_bytes
    old = time.time_ns() - 3_600 * 10**9
    os.utime(target, ns=(old, old))
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False, columns=['id'])
    assert [dataset[0]['id'], dataset[1]['id']] == [0, 1]  # the view of the row group is open now
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))
    with pytest.raises(DatasetVersionError, match='a.parquet was rewritten in place while this job read it'):
        dataset[33_000]  # in a slice not decoded yet


def test_failed_builds_never_prune_a_running_job_s_prints(tmp_path: Any) -> None:
    """Constructions that fail (a file being written, no footer yet) after a job started, then one that succeeds:
    the prints of the job's version are kept with its entries (a review's spawned process read rows 700... when
    failed builds had left prints of their own and the pruning removed the job's)."""
    import time

    from streaming_core.errors import DatasetVersionError
    data = tmp_path / 'data'
    data.mkdir()
    target = str(data / 'a.parquet')
    _ten_rows(target, 0)
    _ten_rows(str(data / 'b.parquet'), 100)
    old = time.time_ns() - 3_600 * 10**9
    for name in ('a.parquet', 'b.parquet'):
        os.utime(data / name, ns=(old, old))
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    for number in range(4):
        (data / 'c.parquet').write_bytes(b'PAR1' + b'x' * (100 + number))
        with pytest.raises(ShardCorruptError):
            StreamingDataset(local=str(data), batch_size=1)
    os.remove(data / 'c.parquet')
    os.chmod(data / 'b.parquet', 0o600)
    assert len(StreamingDataset(local=str(data), batch_size=1)) == 20
    _ten_rows(str(tmp_path / 'new.parquet'), 700)
    _overwrite_keeping_the_stat(target, str(tmp_path / 'new.parquet'))
    stderr = _fresh_process_error(dataset)
    assert b'DatasetVersionError' in stderr, stderr[-2000:]
    assert b'rewritten in place with the same size' in stderr, stderr[-2000:]
    with pytest.raises(DatasetVersionError, match='rewritten in place with the same size'):
        dataset[4]


def test_six_projections_of_one_directory_never_prune_each_other_s_record(tmp_path: Any) -> None:
    """Six datasets on one unchanged directory, each with other ``columns=`` (six identities of one listing), read
    again in fresh processes (spawned workers): the record of the listing each was derived from is kept once for the
    listing, so none is pruned by the others (a review's spawned workers of two of them stopped with "is gone")."""
    import pickle
    import subprocess
    import sys
    data = tmp_path / 'data'
    write_parquet(str(data), files=2, rows=5)
    projections = [['id'], ['id', 'text'], ['id', 'blob'], ['id', 'score'], ['id', 'vec'], ['id', 'meta']]
    datasets = [StreamingDataset(local=str(data), batch_size=1, shuffle=False, columns=columns)
                for columns in projections]
    assert len({dataset.streams[0].index_identity for dataset in datasets}) == 6
    code = ('import pickle, sys, time; dataset = pickle.load(sys.stdin.buffer); len(dataset); time.sleep(3); '
            'print(sorted(dataset[7]))')  # loaded (its index derived again), then read while the others load
    children = [subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE) for _ in datasets]
    for child, dataset in zip(children, datasets):
        child.stdin.write(pickle.dumps(dataset))
        child.stdin.close()
        child.stdin = None  # written: communicate() only reads
    for child, columns in zip(children, projections):
        out, err = child.communicate(timeout=180)
        assert child.returncode == 0, err[-2000:]
        assert out.decode().strip() == str(sorted(columns))


def test_prints_of_another_layout_are_taken_again_not_read(tmp_path: Any) -> None:
    """An index kept with a prints file of an earlier layout (a development version wrote ``[hash, start, length]``
    entries): it is taken again, never unpacked as the current layout (a review's reads failed with ValueError)."""
    import json

    from streaming_core.reading import listing_watch
    from streaming_core.reading.tail_prints import prints_path, read_prints
    data = tmp_path / 'data'
    target = _aged_ten_rows(data)
    dataset = StreamingDataset(local=str(data), batch_size=1, shuffle=False)
    stream = dataset.streams[0]
    path = prints_path(stream.purge_dir, stream.index_identity)
    assert path is not None and read_prints(stream.purge_dir, stream.index_identity) is not None
    with open(path, 'w') as handle:
        json.dump({'taken_ns': 1, 'kind': 'spans', 'prints': {'a.parquet': ['00', 0, 10]}}, handle)
    assert read_prints(stream.purge_dir, stream.index_identity) is None
    listing_watch._prints.clear()  # as in a new process
    again = StreamingDataset(local=str(data), batch_size=1, shuffle=False)  # the index kept, its prints taken again
    assert again.streams[0].index_identity == stream.index_identity
    assert read_prints(stream.purge_dir, stream.index_identity) is not None
    os.chmod(target, 0o600)  # the print is needed
    assert [sample['id'] for sample in again] == list(range(10))
