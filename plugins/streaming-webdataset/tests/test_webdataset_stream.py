"""Streaming WebDataset tars with no index.json: every sample as tarfile reads it (local, copied, over moto S3), the
tar layouts writers produce, shuffles with DataLoader workers, exact mid-epoch resumption in a fresh process, mixing
with MDS."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import textwrap
from typing import Any

import pytest
from wds_data import members_of, read_with_tarfile, sample_id, write_tar, write_tars

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.common.paths import state_dir
from streaming_core.reading.derived_index import DERIVED_INDEX_NAME
from tests.fixtures.data import write_mds
from tests.fixtures.s3 import moto_bucket
from tests.fixtures.servers import RunningServer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_local_directory_every_sample_as_tarfile_reads_it(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    ids = write_tars(data, tars=3, per_tar=25)
    expected = read_with_tarfile(data)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert len(dataset) == 75 == len(expected)
    assert list(dataset) == expected
    assert [sample_id(s) for s in expected] == ids
    for i in (0, 24, 25, 26, 49, 74):  # random access by offset
        assert dataset[i] == expected[i]
    first = dataset[0]
    assert first['__key__'] == '000000' and first['__url__'] == 'shard-00000.tar'
    assert isinstance(first['jpg'], bytes) and first['cls'] == 0 and first['json']['id'] == 0
    assert first['txt'] == 'text of sample 0 \u00e9'
    # Nothing of ours in the user's directory; the derived index lives in the state directory.
    assert sorted(os.listdir(data)) == ['shard-00000.tar', 'shard-00001.tar', 'shard-00002.tar']
    index = json.loads(open(os.path.join(state_dir(data), DERIVED_INDEX_NAME)).read())
    assert [e['samples'] for e in index['shards']] == [25, 25, 25]
    assert index['shards'][0]['columns'] == [['jpg', 'bytes'], ['cls', 'int'], ['json', 'json'], ['txt', 'str']]
    assert dataset.streams[0].index_identity.startswith('derived:webdataset:')


@pytest.mark.parametrize('fmt', [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_layouts_writers_produce(tmp_path: Any, fmt: int) -> None:
    """Keys with directories, long names (pax records, GNU long-name headers, ustar prefixes), multi-dot and upper-case
    fields, ``__meta__`` members and directory entries, in every tar format tarfile writes."""
    deep = 'd' * 60 + '/' + 'e' * 60  # > 100 characters with the file name: needs a long-name mechanism
    members = [('a/x.jpg', b'ax'), ('a/x.seg.png', b'axseg'), ('b/x.jpg', b'bx'), ('__meta__', b'skip me'),
               (f'{deep}/k1.JPG', b'deep'), (f'{deep}/k1.Cls', b'7'), ('plain.txt', b'hello')]
    path = str(tmp_path / 'data' / 'one.tar')
    os.makedirs(os.path.dirname(path))
    with tarfile.open(path, 'w', format=fmt) as tar:
        directory = tarfile.TarInfo('a')
        directory.type = tarfile.DIRTYPE
        tar.addfile(directory)
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    dataset = StreamingDataset(local=str(tmp_path / 'data'), batch_size=1)
    got = list(dataset)
    assert [s['__key__'] for s in got] == ['a/x', 'b/x', f'{deep}/k1', 'plain']
    assert got[0]['jpg'] == b'ax' and got[0]['seg.png'] == b'axseg'
    assert got[2]['jpg'] == b'deep' and got[2]['cls'] == 7
    assert got[3]['txt'] == 'hello'


def test_builder_reads_headers_not_large_members(tmp_path: Any) -> None:
    from streaming_core.reading.derived_index import list_source
    from streaming_webdataset.builder import WebDatasetIndexBuilder
    data = str(tmp_path / 'data')
    big = [(f'{i:04d}.mp4', os.urandom(1 << 20)) for i in range(6)] + [('0000b.cls', b'1')]
    write_tar(os.path.join(data, 'video.tar'), big)
    fetched: list[int] = []

    def read(name: str, start: int, length: int) -> bytes:
        with open(os.path.join(data, name), 'rb') as handle:
            handle.seek(start)
            out = handle.read(length)
        fetched.append(len(out))
        return out
    files = list_source(data)
    index = WebDatasetIndexBuilder().build(files, read, where=data)
    assert index['shards'][0]['samples'] == 7
    assert sum(fetched) < files[0].size // 10  # the 6 MiB of video are never read


def test_shuffle_with_two_dataloader_workers(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=4, per_tar=30)
    dataset = StreamingDataset(remote=data, local=str(tmp_path / 'local'), batch_size=6, shuffle=True,
                               shuffle_block_size=40)
    loader = StreamingDataLoader(dataset, batch_size=6, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(sample_id(s) for s in seen) == list(range(120))
    assert [sample_id(s) for s in seen] != list(range(120))
    expected = {sample_id(s): s for s in read_with_tarfile(data)}
    for sample in seen:
        assert sample == expected[sample_id(sample)]


def test_mid_epoch_resume_in_a_fresh_process_is_exact(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=3, per_tar=35)
    args = dict(local=data, batch_size=4, shuffle=True, num_canonical_nodes=2, shuffle_block_size=40)
    full = [sample_id(s) for s in StreamingDataset(**args)]
    dataset = StreamingDataset(**args)
    seen = []
    for item in dataset:
        if len(seen) == 41:
            break
        seen.append(sample_id(item))
    state_path = tmp_path / 'state.json'
    state_path.write_text(json.dumps(dataset.state_dict(41, True)))
    script = textwrap.dedent(f'''
        import json
        from streaming_core import StreamingDataset
        dataset = StreamingDataset(**{args!r})
        dataset.load_state_dict(json.load(open({str(state_path)!r})))
        print(json.dumps([s['json']['id'] for s in dataset]))
    ''')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    rest = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen + rest == full and set(full) == set(range(105))  # one sample repeats to even out the 2 nodes


def test_mixing_webdataset_and_mds_streams(tmp_path: Any) -> None:
    wds_dir, mds_dir = str(tmp_path / 'wds'), str(tmp_path / 'mds')
    write_tars(wds_dir, tars=2, per_tar=20, start=1000)
    write_mds(mds_dir, 60)
    dataset = StreamingDataset(streams=[Stream(local=wds_dir, proportion=0.5), Stream(local=mds_dir, proportion=0.5)],
                               batch_size=4, shuffle=True, epoch_size=80)
    samples = list(dataset)
    from_wds = [s for s in samples if '__key__' in s]
    assert len(samples) == 80 and len(from_wds) == 40
    assert sorted(sample_id(s) for s in from_wds) == list(range(1000, 1040))


def test_tar_added_later_is_indexed(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_tars(remote, tars=2, per_tar=10)
    first = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert len(first) == 20
    write_tars(remote, tars=1, per_tar=10, start=20)
    grown = StreamingDataset(remote=remote, local=local, batch_size=2)
    assert len(grown) == 30 and grown.streams[0].index_identity != first.streams[0].index_identity
    assert [sample_id(s) for s in grown] == list(range(30))


def test_members_of_one_sample_match_the_writer() -> None:
    assert [name for name, _ in members_of(3)] == ['000003.jpg', '000003.cls', '000003.json', '000003.txt']


# S3 (moto on loopback): headers read with ranged requests, tars downloaded once per node.
BUCKET = 'streaming-webdataset'


@pytest.fixture
def s3_env(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch) -> Any:
    yield from moto_bucket(moto_server, cloud_env, BUCKET)


def upload_dir(client: Any, directory: str, prefix: str) -> None:
    """Upload every file of ``directory`` (flat) under ``prefix``."""
    for name in sorted(os.listdir(directory)):
        client.upload_file(os.path.join(directory, name), BUCKET, f'{prefix}/{name}')


@pytest.mark.slow
def test_over_s3_with_workers_and_the_sidecar(tmp_path: Any, s3_env: Any) -> None:
    import uuid

    from streaming_core.cli import main
    prefix = f'ds-{uuid.uuid4().hex}'
    staging = str(tmp_path / 'staging')
    write_tars(staging, tars=3, per_tar=20)
    expected = {sample_id(s): s for s in read_with_tarfile(staging)}
    upload_dir(s3_env, staging, prefix)
    remote = f's3://{BUCKET}/{prefix}'
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache1'), batch_size=5, shuffle=True)
    assert len(dataset) == 60
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(sample_id(s) for s in seen) == list(range(60))
    for sample in seen:
        assert sample == expected[sample_id(sample)]
    # streaming index writes the sidecar next to the tars; a fresh node reads it instead of walking the headers.
    assert main(['index', remote]) == 0
    body = s3_env.get_object(Bucket=BUCKET, Key=f'{prefix}/webdataset-index.json')['Body'].read()
    sidecar = json.loads(body)
    assert [(r['url'], r['nsamples']) for r in sidecar['shardlist']] == [
        ('shard-00000.tar', 20), ('shard-00001.tar', 20), ('shard-00002.tar', 20)]
    again = StreamingDataset(remote=remote, local=str(tmp_path / 'cache2'), batch_size=5)
    assert again.streams[0].index_identity != dataset.streams[0].index_identity  # the listing changed
    assert [again[i] for i in (0, 33, 59)] == [expected[0], expected[33], expected[59]]


def test_cache_limit_evicts_downloaded_tars(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_tars(remote, tars=4, per_tar=30)
    size = os.path.getsize(os.path.join(remote, 'shard-00000.tar'))
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, cache_limit=2 * size + 100)
    assert sorted(sample_id(s) for s in dataset) == list(range(120))
    assert len([name for name in os.listdir(local) if name.endswith('.tar')]) <= 2


def test_a_tars_sample_table_is_walked_once_and_shared(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_webdataset.reader as reader_module
    data = str(tmp_path / 'data')
    write_tars(data, tars=1, per_tar=12)
    expected = read_with_tarfile(data)
    assert list(StreamingDataset(local=data, batch_size=1)) == expected  # walks, keeps the table

    def no_walk(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('the tar was walked again')
    monkeypatch.setattr(reader_module, 'iter_members', no_walk)
    assert list(StreamingDataset(local=data, batch_size=1)) == expected  # another dataset: the kept table
    # A replaced tar (other bytes, other modification time) is walked, never served from the old table.
    write_tars(data, tars=1, per_tar=12, start=0)
    with pytest.raises(AssertionError, match='walked again'):
        StreamingDataset(local=data, batch_size=1)[0]


def test_sample_tables_can_be_turned_off(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from streaming_webdataset.tablecache import tables_dir
    kept = tmp_path / 'tables'
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', str(kept))
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=3)
    assert len(list(StreamingDataset(local=data, batch_size=1))) == 6
    assert len(os.listdir(kept)) == 2 and tables_dir() == str(kept)
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', '')
    assert tables_dir() is None
    other = str(tmp_path / 'other')
    write_tars(other, tars=1, per_tar=3)
    assert len(list(StreamingDataset(local=other, batch_size=1))) == 3
    assert len(os.listdir(kept)) == 2


def test_sample_tables_default_to_the_users_cache_root_and_old_ones_are_pruned(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables are trusted, so by default they live under the user's own cache root (never a shared temporary
    directory another user could plant a table in), in a private directory; tables untouched for two weeks go."""
    import stat
    import time

    import streaming_webdataset.tablecache as tablecache
    monkeypatch.delenv('STREAMING_WEBDATASET_TABLES', raising=False)
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'cache-root'))
    kept = tmp_path / 'cache-root' / 'webdataset-tables'
    assert tablecache.tables_dir() == str(kept)
    kept.mkdir(parents=True)
    stale, fresh = kept / ('0' * 64 + '.json'), kept / ('1' * 64 + '.json')
    stale.write_text('{}')
    fresh.write_text('{}')
    old = time.time() - tablecache.MAX_TABLE_AGE - 60
    os.utime(stale, (old, old))
    monkeypatch.setattr(tablecache, '_pruned', False)
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=3)
    assert len(list(StreamingDataset(local=data, batch_size=1))) == 6
    names = set(os.listdir(kept))
    assert stale.name not in names and fresh.name in names and len(names) == 3  # two new tables
    private = tmp_path / 'private-root'
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(private))
    other = str(tmp_path / 'other')
    write_tars(other, tars=1, per_tar=3)
    assert len(list(StreamingDataset(local=other, batch_size=1))) == 3
    assert stat.S_IMODE(os.stat(private / 'webdataset-tables').st_mode) == 0o700
    table = next(iter(os.listdir(private / 'webdataset-tables')))
    os.utime(private / 'webdataset-tables' / table, (old, old))
    assert len(list(StreamingDataset(local=other, batch_size=1))) == 3  # read from its table: kept fresh
    assert os.stat(private / 'webdataset-tables' / table).st_mtime > old + 60


@pytest.mark.skipif(os.getuid() != 0, reason='making a directory owned by another user needs root')
def test_a_default_table_directory_another_user_made_is_not_used(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A table is trusted, so the default directory is not used when another user made it (a cache root shared
    between users): a warning names it, nothing is read from or written there, and the samples are still right."""
    import streaming_webdataset.tablecache as tablecache
    monkeypatch.delenv('STREAMING_WEBDATASET_TABLES', raising=False)
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'shared-root'))
    monkeypatch.setattr(tablecache, '_checked', {})
    foreign = tmp_path / 'shared-root' / 'webdataset-tables'
    foreign.mkdir(parents=True)
    os.chown(foreign, 54321, 54321)
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=3)
    with caplog.at_level('WARNING', logger='streaming_webdataset'):
        ids = [sample['__key__'] for sample in StreamingDataset(local=data, batch_size=1)]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6
    assert os.listdir(foreign) == []
    warnings = [r.getMessage() for r in caplog.records if 'belongs to another user' in r.getMessage()]
    assert len(warnings) == 1 and str(foreign) in warnings[0] and 'STREAMING_WEBDATASET_TABLES' in warnings[0]
    assert tablecache.tables_dir() is None


def test_decompressing_a_tar_gz_again_adds_no_sample_table(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a cache limit the decompressed copies of .tar.gz shards are evicted and decompressed again: each time a
    new inode, so a table keyed by inode was written again (514 tables for one epoch of 8 tars, kept 14 days). A copy
    is named by the compressed file's version, so one table per tar serves every decompression."""
    import gzip
    import io
    tables = tmp_path / 'tables'
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', str(tables))
    remote = tmp_path / 'gz'
    remote.mkdir()
    for shard in range(6):
        with tarfile.open(remote / f'train-{shard:04d}.tar.gz', 'w:gz') as tar:
            for i in range(shard * 60, (shard + 1) * 60):
                for name, payload in ((f'{i:06d}.bin', bytes(200)), (f'{i:06d}.cls', str(i % 10).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    first = remote / 'train-0000.tar.gz'
    limit = 3 * (len(gzip.decompress(first.read_bytes())) + first.stat().st_size)
    dataset = StreamingDataset(remote=str(remote), local=str(tmp_path / 'copy'), batch_size=8, shuffle=True,
                               shuffle_block_size=360, cache_limit=limit)
    for _ in range(2):
        assert sorted(int(s['__key__']) for s in dataset) == list(range(360))
    assert 1 <= len(os.listdir(tables)) <= 6
