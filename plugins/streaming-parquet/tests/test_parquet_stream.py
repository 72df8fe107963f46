"""Streaming Parquet directories with no index.json: local, copied from a local remote, over moto S3; shuffles with
DataLoader workers, exact mid-epoch resumption in a fresh process, mixing with MDS, rebuilds on remote changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from parquet_data import assert_row, row, write_parquet

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.common.paths import state_dir
from streaming_core.reading.derived_index import DERIVED_INDEX_NAME, DERIVED_LISTING_NAME
from tests.fixtures.data import ids_of, write_mds
from tests.fixtures.s3 import moto_bucket
from tests.fixtures.servers import RunningServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_local_directory_every_row_as_written(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    ids = write_parquet(data, files=3, rows=100, row_group=30)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert len(dataset) == 300
    for i in (0, 29, 30, 31, 99, 100, 250, 299):
        assert_row(dataset[i])
    samples = list(dataset)
    assert [s['id'] for s in samples] == ids
    for sample in samples:
        assert_row(sample)
    # Nothing of ours in the user's directory; the derived index lives in the state directory.
    assert sorted(os.listdir(data)) == ['part-00000.parquet', 'part-00001.parquet', 'part-00002.parquet']
    sdir = state_dir(data)
    assert os.path.isfile(os.path.join(sdir, DERIVED_INDEX_NAME))
    index = json.loads(open(os.path.join(sdir, DERIVED_INDEX_NAME)).read())
    units = [(e['raw_data']['basename'], e['row_group'], e['samples']) for e in index['shards']]
    assert units == [(f'part-{f:05d}.parquet', g, 10 if g == 3 else 30) for f in range(3) for g in range(4)]
    assert dataset.num_shards == 12 and dataset.catalogue.file_of_shard.tolist() == [0] * 4 + [4] * 4 + [8] * 4
    assert dataset.streams[0].index_identity.startswith('derived:parquet:')


@pytest.mark.parametrize('workers', [0, 1])
def test_a_sample_changed_in_place_changes_no_later_read(tmp_path: Any, workers: int) -> None:
    """Each read of a row gets its own arrays, lists and dicts: a transform that centres ``vec`` in place or edits
    ``meta`` leaves the row's second copy (``repeat=2``), its next read and ``dataset[i]`` as written (the decoded
    row group is kept and used to hand out the same objects)."""
    data = str(tmp_path / 'data')
    write_parquet(data, files=1, rows=12, row_group=12)

    class Centred(StreamingDataset):
        def __getitem__(self, index: int) -> Any:
            sample = super().__getitem__(index)
            assert_row(sample)  # not yet changed by an earlier read
            sample['vec'] -= 0.5
            sample['meta']['n'] += 100
            return sample

    dataset = Centred(streams=[Stream(local=data, repeat=2)], batch_size=1, shuffle=False)
    loader = StreamingDataLoader(dataset, batch_size=None, num_workers=workers)
    seen = [int(sample['id']) for sample in loader]
    assert sorted(seen) == sorted(list(range(12)) * 2)
    plain = StreamingDataset(local=data, batch_size=1)
    for i in (0, 5):
        first = plain[i]
        first['vec'] += 1
        first['meta']['tag'] = 'changed'
        assert_row(plain[i])


def _same_size_file(path: str, tag: str) -> None:
    """Two files of 40 rows in row groups of 20 whose only difference is the text (the same size, byte for byte)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({'id': pa.array(range(40), pa.int64()), 'text': [f'{tag}-{i:04d}' for i in range(40)]}),
                   path, row_group_size=20, compression='none', use_dictionary=False, write_statistics=False)


@pytest.mark.parametrize('where', ['directory', 's3'])
def test_a_file_replaced_on_the_remote_while_a_job_reads_it_stops_the_job(tmp_path: Any, where: str,
                                                                           request: pytest.FixtureRequest) -> None:
    """The same name, size and row groups, other rows: downloaded after the index was derived, it is not served
    under the old index (DatasetVersionError), whether this job is alone or a newer job rebuilt the index."""
    from streaming_core.errors import DatasetVersionError
    staging = str(tmp_path / 'staging')
    os.makedirs(staging)
    for name in ('a', 'b', 'c'):
        _same_size_file(os.path.join(staging, f'{name}.parquet'), 'old')
    _same_size_file(os.path.join(tmp_path, 'new.parquet'), 'new')
    assert os.path.getsize(os.path.join(tmp_path, 'new.parquet')) == os.path.getsize(os.path.join(staging, 'a.parquet'))
    if where == 's3':
        import uuid
        client = request.getfixturevalue('s3_env')
        prefix = f'ds-{uuid.uuid4().hex}'
        _upload(client, staging, prefix)
        remote = f's3://{BUCKET}/{prefix}'

        def replace(name: str) -> None:
            client.upload_file(str(tmp_path / 'new.parquet'), BUCKET, f'{prefix}/{name}')
    else:
        remote = staging

        def replace(name: str) -> None:
            shutil.copyfile(str(tmp_path / 'new.parquet'), os.path.join(staging, name))
    from streaming_core.errors import StorageError
    from streaming_core.reading import listing_watch
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4)
    assert dataset[0]['text'] == 'old-0000'  # a.parquet copied
    replace('b.parquet')
    checked, verdict = [], listing_watch._verdict

    def failing_at_first(stream: Any, name: str, entry: Any, *where: Any) -> Any:
        assert not os.path.exists(str(tmp_path / 'local' / name))  # nothing unchecked is in place meanwhile
        checked.append(name)
        if len(checked) <= 3:  # every attempt of the first read (a download and 2 retries)
            raise StorageError('the store cannot tell now (injected)')
        return verdict(stream, name, entry, *where)

    request.getfixturevalue('monkeypatch').setattr(listing_watch, '_verdict', failing_at_first)
    with pytest.raises(Exception, match='injected'):
        dataset[45]  # the check failed: the download is discarded, never served later unchecked
    assert not os.path.exists(str(tmp_path / 'local' / 'b.parquet')) and len(checked) == 3
    with pytest.raises(DatasetVersionError, match=r'b\.parquet was replaced \(listed as'):
        dataset[45]
    assert not os.path.exists(str(tmp_path / 'local' / 'b.parquet')) and checked == ['b.parquet'] * 4
    assert dataset[1]['text'] == 'old-0001'  # the files of its version still read
    replace('c.parquet')
    newer = StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4)  # rebuilds the index
    assert newer[85]['text'] == 'new-0005'
    with pytest.raises(DatasetVersionError, match='changed while this job read it'):
        dataset[85]  # c.parquet, never copied by the old job: its rebuild stops it too


def test_a_file_of_another_size_or_removed_mid_job_is_a_new_version(tmp_path: Any) -> None:
    """The commonest replacement (another size) and a removal are a new version too (DatasetVersionError, which a
    trainer may catch to restart), not a failed download."""
    from streaming_core.errors import DatasetVersionError
    remote = str(tmp_path / 'remote')
    os.makedirs(remote)
    for name in ('a', 'b', 'c'):
        _same_size_file(os.path.join(remote, f'{name}.parquet'), 'old')
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4, download_retry=0)
    assert dataset[0]['text'] == 'old-0000'
    write_parquet(str(tmp_path / 'other'), files=1, rows=10, row_group=5)
    shutil.copyfile(str(tmp_path / 'other' / 'part-00000.parquet'), os.path.join(remote, 'b.parquet'))
    with pytest.raises(DatasetVersionError, match=r'b\.parquet was replaced'):
        dataset[45]
    os.remove(os.path.join(remote, 'c.parquet'))
    with pytest.raises(DatasetVersionError, match=r'c\.parquet was removed'):
        dataset[85]


def test_a_directory_read_in_place_is_watched_like_a_remote(tmp_path: Any) -> None:
    """No remote: the files are read where they are. A file added (a newer job rebuilding the index) and a chmod
    stop no one; a file replaced mid-job stops the job before it is opened (never old and new rows in one epoch)."""
    import pickle

    from streaming_core.errors import DatasetVersionError
    data = str(tmp_path / 'data')
    os.makedirs(data)
    for name in ('a', 'b', 'c'):
        _same_size_file(os.path.join(data, f'{name}.parquet'), 'old')
    dataset = StreamingDataset(local=data, batch_size=4)
    assert dataset[0]['text'] == 'old-0000'
    _same_size_file(os.path.join(data, 'd.parquet'), 'added')
    os.chmod(os.path.join(data, 'b.parquet'), 0o640)
    assert len(StreamingDataset(local=data, batch_size=4)) == 160  # a newer job: rebuilt with the added file
    assert [dataset[i]['text'] for i in (45, 85)] == ['old-0005', 'old-0005']  # the old job reads on
    worker = pickle.loads(pickle.dumps(dataset))  # opens its files anew, as a worker spawned later would
    _same_size_file(os.path.join(data, 'c.parquet'), 'new')  # replaced: the same size, a new modification time
    assert worker[45]['text'] == 'old-0005'
    with pytest.raises(DatasetVersionError, match=r'c\.parquet was replaced'):
        worker[85]


def test_a_chmod_or_a_hard_link_of_the_remote_files_is_not_a_new_version(tmp_path: Any) -> None:
    """Sharing a dataset (``chmod -R g+rX``) or snapshotting it with hard links moves the files' change times only:
    a running job reads on, and a newer job's rebuild keeps the copies and stops no one; a file rewritten in place
    with its size and modification time restored (``cp -p``) is still not served from its old copy."""
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    os.makedirs(remote)
    for name in ('a', 'b', 'c'):
        _same_size_file(os.path.join(remote, f'{name}.parquet'), 'old')
    running = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert running[0]['text'] == 'old-0000'  # a.parquet copied
    copied = os.stat(os.path.join(local, 'a.parquet')).st_ino
    for name in ('a', 'b', 'c'):
        path = os.path.join(remote, f'{name}.parquet')
        os.chmod(path, 0o640)
        os.link(path, os.path.join(str(tmp_path), f'snapshot-{name}.parquet'))
    assert running[45]['text'] == 'old-0005'  # b.parquet: downloaded after the chmod
    newer = StreamingDataset(remote=remote, local=local, batch_size=4)  # the listing changed: rebuilt
    assert newer.streams[0].index_identity != running.streams[0].index_identity
    assert os.stat(os.path.join(local, 'a.parquet')).st_ino == copied  # kept: its bytes are the remote's
    assert [running[i]['text'] for i in (1, 46, 85)] == ['old-0001', 'old-0006', 'old-0005']
    path = os.path.join(remote, 'a.parquet')
    before = os.stat(path)
    _same_size_file(path, 'new')  # in place, then its modification time restored
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.path.getsize(path) == before.st_size
    assert StreamingDataset(remote=remote, local=local, batch_size=4)[0]['text'] == 'new-0000'


def test_copied_from_a_remote_directory_and_rebuilt_when_it_changes(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_parquet(remote, files=2, rows=50, row_group=20)
    first = StreamingDataset(remote=remote, local=local, batch_size=2, shuffle=True, shuffle_seed=3)
    assert sorted(ids_of(first)) == list(range(100))
    assert not os.path.exists(os.path.join(local, 'index.json'))
    identity = first.streams[0].index_identity
    # Same listing: the derived index is reused (not rebuilt).
    listing = os.path.join(state_dir(local), DERIVED_LISTING_NAME)
    stamp = os.stat(listing).st_mtime_ns
    again = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert again.streams[0].index_identity == identity and os.stat(listing).st_mtime_ns == stamp
    # A file added on the remote: rebuilt, new samples served.
    write_parquet(remote, files=1, rows=50, row_group=20, start=100)
    grown = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert grown.streams[0].index_identity != identity
    assert sorted(ids_of(grown)) == list(range(150))
    # A file replaced on the remote (same name, other rows): the stale local copy is never served.
    os.remove(os.path.join(remote, 'part-00000.parquet'))
    write_parquet(remote, files=1, rows=10, row_group=5, start=1000)  # part-00100.parquet
    os.replace(os.path.join(remote, 'part-00100.parquet'), os.path.join(remote, 'part-00000.parquet'))
    replaced = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert sorted(ids_of(replaced)) == list(range(50, 150)) + list(range(1000, 1010))


def test_a_file_replaced_in_place_with_its_old_size_and_mtime_is_not_served_stale(tmp_path: Any) -> None:
    """``cp -p`` / ``rsync -t --inplace`` over a file of the same size: its size and modification time are the old
    ones, its change time is not; the local copy of the old version must not be served."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    os.makedirs(remote)
    path = os.path.join(remote, 'part.parquet')

    def write(offset: int) -> None:
        table = pa.table({'id': pa.array(range(10), pa.int64()), 'val': pa.array(range(offset, offset + 10),
                                                                                  pa.int64())})
        pq.write_table(table, path, compression='NONE', use_dictionary=False, write_statistics=False)

    write(0)
    first = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert [first[i]['val'] for i in range(10)] == list(range(10))
    before = os.stat(path)
    write(1000)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    again = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert [again[i]['val'] for i in range(10)] == list(range(1000, 1010))


def test_index_json_present_wins(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_mds(data, 7)  # an MDS dataset's index.json in the same directory as Parquet files
    write_parquet(data, files=1, rows=10)
    dataset = StreamingDataset(local=data, batch_size=1)
    assert len(dataset) == 7
    assert not dataset.streams[0].index_identity.startswith('derived:')


def test_shuffle_with_two_dataloader_workers(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=4, rows=60, row_group=25)
    dataset = StreamingDataset(remote=data, local=str(tmp_path / 'local'), batch_size=8, shuffle=True,
                               shuffle_block_size=50)
    assert dataset.num_shards == 12  # row groups of 25, 25, 10 per file
    loader = StreamingDataLoader(dataset, batch_size=8, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(s['id'] for s in seen) == list(range(240))
    assert [s['id'] for s in seen] != list(range(240))
    for sample in seen[:50]:
        assert_row(sample)


def test_mid_epoch_resume_in_a_fresh_process_is_exact(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=3, rows=70, row_group=16)
    args = dict(local=data, batch_size=4, shuffle=True, num_canonical_nodes=2, shuffle_block_size=40)
    full = ids_of(StreamingDataset(**args))
    dataset = StreamingDataset(**args)
    assert dataset.num_shards == 15  # the row groups (16, 16, 16, 16, 6 rows) are the units resumed over
    seen = []
    for item in dataset:
        if len(seen) == 83:
            break
        seen.append(item['id'])
    state_path = tmp_path / 'state.json'
    state_path.write_text(json.dumps(dataset.state_dict(83, True)))
    script = textwrap.dedent(f'''
        import json
        from streaming_core import StreamingDataset
        dataset = StreamingDataset(**{args!r})
        dataset.load_state_dict(json.load(open({str(state_path)!r})))
        print(json.dumps([s['id'] for s in dataset]))
    ''')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    rest = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen + rest == full


def test_mixing_mds_and_parquet_streams_with_proportions(tmp_path: Any) -> None:
    pq_dir, mds_dir = str(tmp_path / 'pq'), str(tmp_path / 'mds')
    write_parquet(pq_dir, files=2, rows=40, row_group=15, start=10_000)
    write_mds(mds_dir, 60)
    dataset = StreamingDataset(streams=[Stream(local=pq_dir, proportion=0.5), Stream(local=mds_dir, proportion=0.5)],
                               batch_size=4, shuffle=True, epoch_size=100)
    samples = list(dataset)
    assert len(samples) == 100
    from_pq = [s for s in samples if 'text' in s]
    assert len(from_pq) == 50 and all(10_000 <= s['id'] < 10_080 for s in from_pq)
    for sample in from_pq:
        assert_row(sample)


# S3 (moto on loopback): footers read with ranged requests, files downloaded once, a remote change rebuilds.
BUCKET = 'streaming-parquet'


@pytest.fixture
def s3_env(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch) -> Any:
    yield from moto_bucket(moto_server, cloud_env, BUCKET)


def _upload(client: Any, directory: str, prefix: str) -> None:
    for name in sorted(os.listdir(directory)):
        client.upload_file(os.path.join(directory, name), BUCKET, f'{prefix}/{name}')


@pytest.mark.slow
def test_over_s3_with_workers_and_a_rebuild(tmp_path: Any, s3_env: Any) -> None:
    import uuid
    prefix = f'ds-{uuid.uuid4().hex}'
    staging = str(tmp_path / 'staging')
    write_parquet(staging, files=3, rows=50, row_group=20)
    _upload(s3_env, staging, prefix)
    remote = f's3://{BUCKET}/{prefix}'
    dataset = StreamingDataset(remote=remote, batch_size=5, shuffle=True)
    assert len(dataset) == 150 and dataset.num_shards == 9  # row groups of 20, 20, 10 rows
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(s['id'] for s in seen) == list(range(150))
    for sample in seen:
        assert_row(sample)
    more = str(tmp_path / 'more')
    write_parquet(more, files=1, rows=30, row_group=20, start=500)
    _upload(s3_env, more, prefix)
    grown = StreamingDataset(remote=remote, batch_size=5)
    assert len(grown) == 180 and grown.streams[0].index_identity != dataset.streams[0].index_identity
    assert_row(grown[170])
    again = grown[170]
    assert_row(again)
    assert again['id'] == row(520)['id']


def test_build_index_for_tools_equals_the_streams_derived_index(tmp_path: Any) -> None:
    from streaming_core.reading.derived_index import build_index
    data = str(tmp_path / 'data')
    write_parquet(data, files=2, rows=30, row_group=7)
    StreamingDataset(local=data, batch_size=1)
    cached = json.loads(open(os.path.join(state_dir(data), DERIVED_INDEX_NAME)).read())
    assert build_index(data) == cached
    assert [entry['raw_data']['basename'] for entry in cached['shards']] == ['part-00000.parquet'] * 5 + [
        'part-00001.parquet'] * 5  # one unit per row group of 7, 7, 7, 7, 2 rows
    assert [entry['row_group'] for entry in cached['shards']] == list(range(5)) * 2
    assert cached['shards'][0]['columns'][:2] == [['id', 'int64'], ['text', 'string']]


def test_indexing_shows_a_progress_bar_of_the_files_read(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    # A build that takes longer than FileProgress.DELAY shows a bar of the files whose footers were read (each file
    # once, however many reads its footer took); 0 here, so this small build shows it.
    from streaming_core.reading import derived_index
    bars: list[Any] = []
    real = derived_index.FileProgress

    class Recorded(real):  # type: ignore[misc, valid-type]
        DELAY = 0.0

        def close(self) -> None:
            assert type(self._bar).monitor_interval == 0  # no monitor thread left in a process that forks
            bars.append((self._bar.n, self._bar.total, set(self.seen)))
            super().close()

    monkeypatch.setattr(derived_index, 'FileProgress', Recorded)
    data = str(tmp_path / 'data')
    write_parquet(data, files=5, rows=20, row_group=7)
    dataset = StreamingDataset(remote=data, local=str(tmp_path / 'cache'), batch_size=4)
    assert len(dataset) == 100
    assert bars == [(5, 5, {f'part-0000{i}.parquet' for i in range(5)})]
    assert 'Indexing' in capsys.readouterr().err
    # A kept index reads no file: no bar.
    StreamingDataset(remote=data, local=str(tmp_path / 'cache'), batch_size=4)
    assert len(bars) == 1


def test_copies_listed_before_the_change_time_was_kept_are_not_taken_for_stale(tmp_path: Any) -> None:
    """A derived index of a local remote recorded by an earlier version (mtimes without the change time): the same
    files are the same versions, so their local copies are kept (not downloaded again) when the index is rebuilt."""
    import json

    from streaming_core.reading.derived_index import DERIVED_LISTING_NAME
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_parquet(remote, files=2, rows=40, row_group=20)
    first = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert sorted(ids_of(first)) == list(range(80))
    listing_path = os.path.join(state_dir(local), DERIVED_LISTING_NAME)
    listing = json.loads(open(listing_path).read())
    assert all('/' in row[3] for row in listing['files'])
    listing['files'] = [row[:3] + [row[3].split('/')[0]] for row in listing['files']]
    listing['identity'] = 'derived:parquet:recorded-by-an-earlier-version'
    with open(listing_path, 'w') as handle:
        json.dump(listing, handle)
    copies = {name: os.stat(os.path.join(local, name)).st_ino for name in os.listdir(local)
              if name.endswith('.parquet')}
    assert copies
    again = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert sorted(ids_of(again)) == list(range(80))
    assert {name: os.stat(os.path.join(local, name)).st_ino for name in copies} == copies
