"""A directory read in place (no ``remote``) is the user's data: a stream with a remote is refused on it, never
adopting it as its cache and replacing files of the same names; and the local copy of a remote read offline is read
through the index of the remote's files, never as the subset that happened to be downloaded."""

from __future__ import annotations

import hashlib
import os

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.reading.cache_record import CacheRemoteMismatchError
from tests.deps import require
from tests.fixtures.data import ids_of, write_mds


def _digests(directory: str) -> dict[str, str]:
    return {name: hashlib.sha256(open(os.path.join(directory, name), 'rb').read()).hexdigest()
            for name in sorted(os.listdir(directory))}


def _parquet_dir(directory: str, files: int, rows: int, start: int = 0) -> str:
    require('pyarrow')
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        first = start + f * rows
        pq.write_table(pa.table({'id': list(range(first, first + rows))}), os.path.join(directory, f'part-{f}.parquet'))
    return directory


@pytest.mark.parametrize('warm_before_records', [False, True])
def test_a_remote_is_refused_on_a_directory_read_in_place(tmp_path, warm_before_records):
    """Before, ``StreamingDataset(local=X)`` wrote no record, and a later ``StreamingDataset(remote=R, local=X)``
    adopted X as R's cache: X's shards, of the same names, were replaced by R's, silently."""
    mine, theirs = str(tmp_path / 'mine'), str(tmp_path / 'theirs')
    write_mds(mine, 100)
    write_mds(theirs, 100, start=1000)
    before = _digests(mine)
    assert ids_of(StreamingDataset(local=mine, batch_size=4)) == list(range(100))
    if warm_before_records:  # read by a version that wrote no record: the warm construction writes it
        from streaming_core.common.paths import state_dir
        os.remove(os.path.join(state_dir(mine), 'record.json'))
        assert ids_of(StreamingDataset(local=mine, batch_size=4)) == list(range(100))
    with pytest.raises(CacheRemoteMismatchError, match='read in place as a dataset of its own'):
        StreamingDataset(remote=theirs, local=mine, batch_size=4)
    assert _digests(mine) == before
    assert ids_of(StreamingDataset(local=mine, batch_size=4)) == list(range(100))


def test_a_remote_is_refused_on_a_parquet_directory_read_in_place(tmp_path):
    """A directory of Parquet files has no index.json: the record alone tells it is someone's data."""
    mine, theirs = str(tmp_path / 'mine'), str(tmp_path / 'theirs')
    _parquet_dir(mine, 2, 50)
    write_mds(theirs, 100, start=1000)
    before = _digests(mine)
    assert sorted(ids_of(StreamingDataset(local=mine, batch_size=4))) == list(range(100))
    with pytest.raises(CacheRemoteMismatchError):
        StreamingDataset(remote=theirs, local=mine, batch_size=4)
    assert _digests(mine) == before  # no index.json of theirs beside my files: it would win over them


@pytest.mark.parametrize('remote_first', [False, True])
def test_streams_of_one_dataset_sharing_a_local_with_different_data_are_refused(tmp_path, remote_first):
    mine, theirs = str(tmp_path / 'mine'), str(tmp_path / 'theirs')
    write_mds(mine, 60)
    write_mds(theirs, 60, start=1000)
    before = _digests(mine)
    streams = [Stream(local=mine), Stream(remote=theirs, local=mine)]
    with pytest.raises(ValueError, match='share the local directory .* Give each stream its own `local`'):
        StreamingDataset(streams=streams[::-1] if remote_first else streams, batch_size=4)
    assert _digests(mine) == before
    # Two views of one dataset (the same remote and local) stay allowed.
    local = str(tmp_path / 'copy')
    both = StreamingDataset(streams=[Stream(remote=theirs, local=local), Stream(remote=theirs, local=local)],
                            batch_size=4)
    assert sorted(ids_of(both)) == sorted(list(range(1000, 1060)) * 2)


def test_a_partial_local_copy_of_a_parquet_remote_read_offline_is_not_a_silent_subset(tmp_path):
    """After part of an epoch (or a cache limit), the local copy holds some of the remote's files. Read with
    ``local=`` alone (as offline), it used to be indexed from the files present: a third of the rows, no error."""
    remote, local = _parquet_dir(str(tmp_path / 'remote'), 6, 40), str(tmp_path / 'local')
    online = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert len(online) == 240
    assert [int(online[i]['id']) for i in (0, 45)] == [0, 45]  # two of the six files downloaded
    assert sorted(name for name in os.listdir(local) if name.endswith('.parquet')) == ['part-0.parquet',
                                                                                       'part-1.parquet']
    offline = StreamingDataset(local=local, batch_size=4)
    assert len(offline) == 240
    assert int(offline[45]['id']) == 45
    with pytest.raises(Exception, match='part-5.parquet'):
        offline[239]
    from streaming_core.common.paths import state_dir
    from streaming_core.reading.derived_index import DERIVED_INDEX_NAME, NoLocalDatasetError
    os.remove(os.path.join(state_dir(local), DERIVED_INDEX_NAME))  # the recorded index lost: never the subset
    with pytest.raises(NoLocalDatasetError, match='is a local copy of .* Read it with remote='):
        StreamingDataset(local=local, batch_size=4)


@pytest.mark.parametrize('hashes', [None, ['xxh64']])
def test_a_directory_read_in_place_is_adopted_by_a_remote_only_as_an_exact_copy_or_once_its_record_is_removed(
        tmp_path, hashes):
    """A copy of a remote staged by hand and read once without `remote`: with a hash of every file in the index
    (identical to the remote's), it is proven an exact copy and adopted, nothing replaced; without, it is refused as
    the user's own data (nothing tells a copy from other data of the same shape): the error names our record, never
    the data, to remove, and then the directory is adopted as the remote's cache."""
    import shutil
    remote, staged = str(tmp_path / 'remote'), str(tmp_path / 'staged')
    write_mds(remote, 50, hashes=hashes)
    shutil.copytree(remote, staged)
    if hashes:
        before = {n: os.stat(os.path.join(staged, n)).st_ino for n in os.listdir(staged)}
        assert ids_of(StreamingDataset(local=staged, batch_size=5)) == list(range(50))
        assert ids_of(StreamingDataset(remote=remote, local=staged, batch_size=5)) == list(range(50))
        assert {n: os.stat(os.path.join(staged, n)).st_ino for n in os.listdir(staged)} == before
        return
    before = _digests(staged)
    assert ids_of(StreamingDataset(local=staged, batch_size=5)) == list(range(50))
    with pytest.raises(CacheRemoteMismatchError, match='read in place as a dataset of its own') as err:
        StreamingDataset(remote=remote, local=staged, batch_size=5)
    message = str(err.value)
    assert f'delete {staged}' not in message and _digests(staged) == before
    record = message.split('remove ', 1)[1].split(' ', 1)[0]
    assert record.endswith('record.json') and os.path.isfile(record)
    os.remove(record)
    assert ids_of(StreamingDataset(remote=remote, local=staged, batch_size=5)) == list(range(50))


def test_a_former_cache_refilled_with_the_users_own_files_is_read_in_place(tmp_path):
    """A directory that was the cache of an MDS remote, emptied and refilled with the user's own Parquet files: its
    record names the remote, which had an index.json (no index derived from its files to lose), so the files are
    read as they are."""
    import shutil
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 20)
    assert len(StreamingDataset(remote=remote, local=local, batch_size=4)) == 20
    shutil.rmtree(local)
    _parquet_dir(local, 1, 7)
    assert sorted(ids_of(StreamingDataset(local=local, batch_size=1))) == list(range(7))


def test_a_dataset_the_writer_committed_in_place_is_refused_as_another_remote_s_cache(tmp_path):
    """``MDSWriter(out=X)`` and then, by mistake, ``StreamingDataset(remote=Y, local=X)``: X was adopted as Y's cache
    (nothing recorded it as a dataset) and its files of the same names replaced by Y's, silently. The writer now
    records its output as a dataset of its own: refused, nothing touched, and X still reads as written. A staging
    directory of an upload (``out=(local, remote)``) is a copy of that remote, read through it as before."""
    mine, theirs = str(tmp_path / 'mine'), str(tmp_path / 'theirs')
    write_mds(mine, 40)
    write_mds(theirs, 40, start=500)
    before = _digests(mine)
    for other in (theirs, str(tmp_path / 'nowhere')):  # another dataset, or a remote that cannot be read
        with pytest.raises(CacheRemoteMismatchError, match='written or read in place as a dataset of its own') as err:
            StreamingDataset(remote=other, local=mine, batch_size=4)
        assert ('could not be read' in str(err.value)) == other.endswith('nowhere')
    assert _digests(mine) == before
    # A merged root (partitions written in parallel, then merge_index) is a writer's output too.
    from streaming_core import merge_index
    merged = str(tmp_path / 'merged')
    write_mds(os.path.join(merged, '0'), 20)
    write_mds(os.path.join(merged, '1'), 20, start=20)
    merge_index(merged)
    with pytest.raises(CacheRemoteMismatchError, match='written or read in place as a dataset of its own'):
        StreamingDataset(remote=theirs, local=merged, batch_size=4)
    assert ids_of(StreamingDataset(local=merged, batch_size=4)) == list(range(40))
    assert ids_of(StreamingDataset(local=mine, batch_size=4)) == list(range(40))
    staged, uploaded = str(tmp_path / 'staged'), str(tmp_path / 'uploaded')
    write_mds(staged, 10, start=800)  # written in place first, then again as the staging of an upload
    write_mds((staged, uploaded), 40, start=900, keep_local=True, exist_ok=True)
    assert ids_of(StreamingDataset(remote=uploaded, local=staged, batch_size=4)) == list(range(900, 940))
    # Written here, then uploaded by another tool: an exact copy (its index records a hash of each file) is read
    # through the upload, nothing replaced; without hashes it cannot be told from other data and is refused.
    import shutil
    for hashes in (['sha1'], None):
        out, copy = str(tmp_path / f'out-{bool(hashes)}'), str(tmp_path / f'copy-{bool(hashes)}')
        write_mds(out, 40, start=300, hashes=hashes)
        shutil.copytree(out, copy)
        before = _digests(out)
        if hashes:
            assert ids_of(StreamingDataset(remote=copy, local=out, batch_size=4)) == list(range(300, 340))
        else:
            with pytest.raises(CacheRemoteMismatchError, match='written or read in place'):
                StreamingDataset(remote=copy, local=out, batch_size=4)
        assert _digests(out) == before
