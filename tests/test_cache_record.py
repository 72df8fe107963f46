"""A cache knows what it holds (issue 12 items 2, 6, 11; issue 19 item 4).

The user's steps, each read in a fresh Python process as a user would run them: one local directory used for
another remote is refused naming both; a remote rewritten (more samples, or other content under the same shard
names) is read afresh, never stale; a corrupt remote index once cached is read fine once the remote is fixed; local
only and read-in-place streams; concurrent constructions on one fresh or changed cache; S3 over moto.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.common.paths import COORD_NAME, LOCK_NAME, state_dir
from streaming_core.reading.cache_record import CacheRemoteMismatchError, is_in_place, record_of
from tests.fixtures.data import COLUMNS, sample, write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Reads every sample of (remote, local) in a fresh process and prints [[id, data hex], ...] and the identity.
READ = '''
import json, sys, time
from streaming_core import StreamingDataset
remote, local = sys.argv[1], sys.argv[2]
if len(sys.argv) > 3:
    time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # start together with the other readers
ds = StreamingDataset(remote=remote, local=local, batch_size=1)
print(json.dumps({'samples': [[int(s['id']), bytes(s['data']).hex()] for s in ds],
                  'identity': ds.streams[0].index_identity}))
'''


def _spawn(remote: str, local: str, *extra: str) -> subprocess.Popen:
    env = {**os.environ, 'PYTHONPATH': ROOT}
    return subprocess.Popen([sys.executable, '-c', READ, remote, local, *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _finish(proc: subprocess.Popen) -> tuple[int, dict[str, Any] | None, str]:
    out, err = proc.communicate(timeout=300)
    return proc.returncode, (json.loads(out) if proc.returncode == 0 else None), err


def read_fresh(remote: str, local: str) -> dict[str, Any]:
    """Read every sample in a fresh process; fail with its stderr when it fails."""
    code, result, err = _finish(_spawn(remote, local))
    assert code == 0, err
    assert result is not None
    return result


def fail_fresh(remote: str, local: str) -> str:
    """Construct in a fresh process that must fail; its stderr."""
    code, _, err = _finish(_spawn(remote, local))
    assert code != 0, 'the reader should have failed'
    return err


def expected(ids: list[int], size: int = 32) -> list[list[Any]]:
    return [[i, sample(i, size)['data'].hex()] for i in ids]


def write_ids(out: str, ids: list[int], *, size: int = 32, hashes: list[str] | None = None,
              exist_ok: bool = False) -> str:
    """An MDS dataset of exactly these sample ids (1 KiB shards)."""
    from streaming_mds import MDSWriter
    with MDSWriter(out=out, columns=COLUMNS, size_limit=1 << 10, hashes=hashes, exist_ok=exist_ok) as writer:
        for i in ids:
            writer.write(sample(i, size))
    return out


def _listing(directory: str) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(dirpath, name)
            info = os.stat(path)
            out[os.path.relpath(path, directory)] = (info.st_size, info.st_mtime_ns)
    return out


# ---------------------------------------------------------------------------------------------------------------
def test_another_remote_into_the_same_local_is_refused_naming_both(tmp_path):
    remote_a = write_mds(str(tmp_path / 'remote-a'), 10)
    remote_b = write_mds(str(tmp_path / 'remote-b'), 10, start=100)
    local = str(tmp_path / 'cache')
    assert read_fresh(remote_a, local)['samples'] == expected(list(range(10)))
    err = fail_fresh(remote_b, local)
    assert 'CacheRemoteMismatchError' in err
    assert remote_a in err and remote_b in err and local in err and 'another `local`' in err
    assert sorted(n for n in os.listdir(local) if n.startswith('shard.')) == \
        sorted(n for n in os.listdir(remote_a) if n.startswith('shard.'))  # nothing of A was touched
    # What the message says to do: another local works, and so does deleting the directory.
    assert read_fresh(remote_b, str(tmp_path / 'cache-b'))['samples'] == expected(list(range(100, 110)))
    shutil.rmtree(local)
    assert read_fresh(remote_b, local)['samples'] == expected(list(range(100, 110)))


def test_rewritten_remote_with_more_samples_is_read_afresh(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 10)
    local = str(tmp_path / 'cache')
    first = read_fresh(remote, local)
    assert first['samples'] == expected(list(range(10)))
    write_mds(remote, 20, sample_size=40, exist_ok=True)  # 10 samples became 20, each with other content
    second = read_fresh(remote, local)
    assert second['samples'] == expected(list(range(20)), 40)
    assert second['identity'] != first['identity']
    record = record_of(local)
    assert record is not None and record.remote_dir == remote and record.source_identity == second['identity']


@pytest.mark.parametrize('hashes', [None, ['sha1']], ids=['no-hashes', 'sha1'])
def test_shard_rewritten_under_the_same_name_is_never_served_stale(tmp_path, hashes):
    ids = list(range(80))
    remote = write_ids(str(tmp_path / 'remote'), ids, hashes=hashes)
    local = str(tmp_path / 'cache')
    assert read_fresh(remote, local)['samples'] == expected(ids)
    with open(os.path.join(remote, 'index.json')) as handle:
        shards = json.load(handle)['shards']
    assert len(shards) >= 3 and shards[0]['samples'] < 40
    first_shard = os.path.join(local, shards[0]['raw_data']['basename'])
    inode_before = os.stat(first_shard).st_ino
    # Same names, same sizes: samples 40.. get other ids (same byte length), the first shard is unchanged.
    new_ids = ids[:40] + [1000 + i for i in ids[40:]]
    time.sleep(0.01)
    write_ids(remote, new_ids, hashes=hashes, exist_ok=True)
    with open(os.path.join(remote, 'index.json')) as handle:
        rewritten = json.load(handle)['shards']
    assert [s['raw_data']['bytes'] for s in rewritten] == [s['raw_data']['bytes'] for s in shards]
    assert read_fresh(remote, local)['samples'] == expected(new_ids)
    if hashes:  # the index proves the first shard unchanged: kept, not downloaded again
        assert os.stat(first_shard).st_ino == inode_before
    else:  # nothing proves it: downloaded again
        assert rewritten == shards  # byte-identical index: only the remote index's stat shows the rewrite


def test_corrupt_remote_index_then_fixed_reads_fine(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 30)
    good = open(os.path.join(remote, 'index.json'), 'rb').read()
    with open(os.path.join(remote, 'index.json'), 'wb') as handle:
        handle.write(good[:40])  # truncated
    local = str(tmp_path / 'cache')
    err = fail_fresh(remote, local)
    assert 'IndexFormatError' in err and os.path.join(remote, 'index.json') in err
    assert os.path.join(local, 'index.json') in err
    with open(os.path.join(remote, 'index.json'), 'wb') as handle:
        handle.write(good)
    assert read_fresh(remote, local)['samples'] == expected(list(range(30)))


def test_corrupt_index_cached_by_an_earlier_version_is_replaced(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 30)
    local = tmp_path / 'cache'
    local.mkdir()
    (local / 'index.json').write_text('{"shards": [')  # what an earlier version cached from a broken remote
    (local / COORD_NAME).write_bytes(b'')  # and its lock file
    assert read_fresh(remote, str(local))['samples'] == expected(list(range(30)))
    assert not (local / COORD_NAME).exists()
    assert (local / 'index.json').read_bytes() == open(os.path.join(remote, 'index.json'), 'rb').read()


def test_remote_index_corrupt_with_a_good_local_copy_names_both(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 30)
    local = str(tmp_path / 'cache')
    read_fresh(remote, local)
    with open(os.path.join(remote, 'index.json'), 'w') as handle:
        handle.write('{"version": 2, "shards": 7}')
    err = fail_fresh(remote, local)
    assert os.path.join(remote, 'index.json') in err and os.path.join(local, 'index.json') in err
    assert 'was left as it was' in err


@pytest.mark.parametrize('hashes', [None, ['xxh64']])
def test_earlier_cache_without_record_is_adopted(tmp_path, hashes):
    """A local copy without a record (an earlier version's, another tool's) is adopted: files the index vouches for
    by a hash are kept; the others, which nothing shows to be of this version, are fetched again."""
    remote = write_mds(str(tmp_path / 'remote'), 40, hashes=hashes)
    local = tmp_path / 'cache'
    shutil.copytree(remote, local)
    (local / COORD_NAME).write_bytes(b'')
    def files() -> dict[str, tuple[int, int]]:  # inode and change time: a freed inode number may be reused at once
        return {n: (os.stat(local / n).st_ino, os.stat(local / n).st_ctime_ns) for n in os.listdir(local)
                if n.startswith('shard.')}
    before = files()
    assert read_fresh(remote, str(local))['samples'] == expected(list(range(40)))
    after = files()
    assert sorted(after) == sorted(before)
    assert (after == before) if hashes else not set(after.items()) & set(before.items())
    assert sorted(os.listdir(local)) == sorted(os.listdir(remote))  # the local directory mirrors the remote
    assert record_of(str(local)) is not None


@pytest.mark.parametrize('how', ['index copied in by hand', 'left by another library'])
def test_a_copy_of_unknown_provenance_keeps_a_hashed_file_only_when_its_bytes_match(tmp_path, how):
    """The local files of a directory of unknown provenance are not described by its index.json: a v1 copy under the
    v2 index (copied in by hand, or what another library's cache holds after it fetched the new index but kept its
    shards) is hashed before it is kept. Here every v1 shard has v2's name and size but not its hash."""
    remote = write_ids(str(tmp_path / 'remote'), list(range(40)), hashes=['sha1'])
    local = str(tmp_path / 'cache')
    if how == 'index copied in by hand':
        assert read_fresh(remote, local)['samples'] == expected(list(range(40)))
    else:
        shutil.copytree(remote, local)
    shards = sorted(n for n in os.listdir(local) if n.startswith('shard.'))
    write_ids(remote, list(range(1000, 1040)), hashes=['sha1'], exist_ok=True)
    assert sorted(n for n in os.listdir(remote) if n.startswith('shard.')) == shards
    assert all(os.path.getsize(os.path.join(remote, n)) == os.path.getsize(os.path.join(local, n)) for n in shards)
    shutil.copy(os.path.join(remote, 'index.json'), os.path.join(local, 'index.json'))
    assert read_fresh(remote, local)['samples'] == expected(list(range(1000, 1040)))
    kept = {n: os.stat(os.path.join(local, n)).st_ino for n in os.listdir(local) if n.startswith('shard.')}
    os.remove(os.path.join(state_dir(local), 'record.json'))  # unknown again, now holding v2's bytes: kept
    assert read_fresh(remote, local)['samples'] == expected(list(range(1000, 1040)))
    assert {n: os.stat(os.path.join(local, n)).st_ino for n in os.listdir(local) if n.startswith('shard.')} == kept


def test_a_copy_of_unknown_version_with_the_same_index_bytes_is_never_served(tmp_path, monkeypatch):
    """Fixed-size samples without hashes, rewritten with new content, give the same index.json bytes: a local copy
    of the old version whose record is gone (the cache root wiped) is not taken for the new one; nor is a local
    directory another cache root's job filled from another remote (each job reads its own remote's samples)."""
    remote = write_ids(str(tmp_path / 'remote'), list(range(40)))
    local = str(tmp_path / 'local')
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root1'))
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert [dataset[i]['id'] for i in range(0, 40, 3)] == list(range(0, 40, 3))  # part of v1 copied
    with open(os.path.join(remote, 'index.json'), 'rb') as handle:
        before = handle.read()
    shutil.rmtree(tmp_path / 'root1')
    write_ids(remote, list(range(1000, 1040)), exist_ok=True)
    with open(os.path.join(remote, 'index.json'), 'rb') as handle:
        assert handle.read() == before
    assert sorted(s['id'] for s in StreamingDataset(remote=remote, local=local, batch_size=4)) == \
        list(range(1000, 1040))
    # A chmod of the local index.json (sharing a cache: `chmod -R g+w`) changes its change time only: nothing is
    # fetched again.
    kept = {n: os.stat(os.path.join(local, n)).st_ino for n in os.listdir(local) if n.startswith('shard.')}
    os.chmod(os.path.join(local, 'index.json'), 0o664)
    assert sorted(s['id'] for s in StreamingDataset(remote=remote, local=local, batch_size=4)) == \
        list(range(1000, 1040))
    assert {n: os.stat(os.path.join(local, n)).st_ino for n in os.listdir(local) if n.startswith('shard.')} == kept
    # Two remotes of the same shape through one local directory, one after the other, under two cache roots.
    other = write_ids(str(tmp_path / 'other'), list(range(5000, 5040)))
    shared = str(tmp_path / 'shared')
    for root, source, first in (('c1', remote, 1000), ('c2', other, 5000), ('c1', remote, 1000)):
        monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / root))
        ids = sorted(s['id'] for s in StreamingDataset(remote=source, local=shared, batch_size=4))
        assert ids == list(range(first, first + 40)), (root, source)


def test_splits_have_their_own_record_and_refresh_independently(tmp_path):
    remote = str(tmp_path / 'remote')
    write_mds(os.path.join(remote, 'train'), 30, hashes=['sha1'])
    write_mds(os.path.join(remote, 'val'), 10, start=500, hashes=['sha1'])
    local = str(tmp_path / 'cache')

    def ids(split: str) -> list[int]:
        return [int(s['id']) for s in StreamingDataset(remote=remote, local=local, split=split, batch_size=1)]

    assert ids('train') == list(range(30)) and ids('val') == list(range(500, 510))
    train_shards = {n: os.stat(os.path.join(local, 'train', n)).st_ino
                    for n in os.listdir(os.path.join(local, 'train')) if n.startswith('shard.')}
    write_mds(os.path.join(remote, 'val'), 12, start=700, hashes=['sha1'], exist_ok=True)
    assert ids('val') == list(range(700, 712)) and ids('train') == list(range(30))
    assert {n: os.stat(os.path.join(local, 'train', n)).st_ino for n in train_shards} == train_shards
    for split in ('train', 'val'):
        record = record_of(os.path.join(local, split))
        assert record is not None and record.split == split and record.remote == remote
        assert record.remote_dir == os.path.join(remote, split)


def test_local_directory_holds_no_file_of_ours(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    local = str(tmp_path / 'cache')
    read_fresh(remote, local)
    assert sorted(os.listdir(local)) == sorted(os.listdir(remote))
    assert os.path.exists(os.path.join(state_dir(local), LOCK_NAME))


def test_local_only_stream(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 30)
    before = _listing(path)
    dataset = StreamingDataset(local=path, batch_size=1)
    assert [s['id'] for s in dataset] == list(range(30))
    identity = dataset.streams[0].index_identity
    assert identity is not None and identity.startswith('file:')
    assert _listing(path) == before  # nothing added, nothing changed
    record = record_of(path)  # in the state directory: the directory is claimed as read in place (test_local_claims)
    assert record is not None and is_in_place(record.remote_dir, path) and record.source_identity == identity
    write_mds(path, 35, start=50, exist_ok=True)
    again = StreamingDataset(local=path, batch_size=1)
    assert again.streams[0].index_identity != identity
    assert [s['id'] for s in again] == list(range(50, 85))
    assert record_of(path).source_identity == again.streams[0].index_identity


def test_read_in_place_never_touches_the_directory(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 30, compression='zstd')
    before = _listing(path)
    result = read_fresh(path, path)
    assert result['samples'] == expected(list(range(30)))
    assert result['identity'].startswith('file:')
    after = _listing(path)
    assert {name: after.get(name) for name in before} == before  # nothing removed or changed
    assert all(name + '.zstd' in before for name in set(after) - set(before))  # only decompressed copies added
    record = record_of(path)
    assert record is not None and record.remote_dir == path
    other = write_mds(str(tmp_path / 'other'), 5)
    err = fail_fresh(other, path)  # another remote into the dataset directory: refused, nothing written
    assert 'CacheRemoteMismatchError' in err and other in err
    assert _listing(path) == after


def test_validate_hash_not_in_the_index_is_refused_at_construction(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 30, hashes=['sha1'])
    local = tmp_path / 'cache'
    with pytest.raises(ValueError, match=r"`xxh64`.*\['sha1'\]") as info:
        StreamingDataset(remote=remote, local=str(local), batch_size=1, validate_hash='xxh64')
    assert remote in str(info.value)
    assert os.listdir(local) == ['index.json']  # refused before any shard download


def test_unreachable_remote_uses_the_recorded_copy_with_a_warning(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 20)
    local = str(tmp_path / 'cache')
    read_fresh(remote, local)
    shutil.move(remote, str(tmp_path / 'moved'))
    with pytest.warns(UserWarning, match='may be out of date'):
        dataset = StreamingDataset(remote=remote, local=local, batch_size=1, download_retry=0)
    assert [s['id'] for s in dataset] == list(range(20))


# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_concurrent_constructions_on_a_fresh_then_changed_cache(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60)
    local = str(tmp_path / 'cache')
    start = str(time.time() + 4)
    procs = [_spawn(remote, local, start) for _ in range(3)]
    results = [_finish(p) for p in procs]
    for code, result, err in results:
        assert code == 0, err
        assert result is not None and result['samples'] == expected(list(range(60)))
    assert len({r[1]['identity'] for r in results if r[1]}) == 1
    write_mds(remote, 70, start=300, sample_size=48, exist_ok=True)
    start = str(time.time() + 4)
    procs = [_spawn(remote, local, start) for _ in range(3)]
    for code, result, err in (_finish(p) for p in procs):
        assert code == 0, err
        assert result is not None and result['samples'] == expected(list(range(300, 370)), 48)
    assert not [n for n in os.listdir(local) if n.endswith('.tmp')]
    assert not [n for n in os.listdir(state_dir(local)) if n.endswith('.tmp')]


@pytest.mark.slow
def test_s3_remote_changed_and_another_remote(tmp_path, moto_server, cloud_env):
    import boto3
    bucket = 'cache-record'
    boto3.client('s3', endpoint_url=moto_server.url, aws_access_key_id='testing', aws_secret_access_key='testing',
                 region_name='us-east-1').create_bucket(Bucket=bucket)
    options = {'endpoint_url': moto_server.url, 'aws_access_key_id': 'testing', 'aws_secret_access_key': 'testing',
               'region': 'us-east-1'}
    url_a, url_b = f's3://{bucket}/a', f's3://{bucket}/b'
    write_mds((str(tmp_path / 'out-a'), url_a), 10, storage_options=options)
    write_mds((str(tmp_path / 'out-b'), url_b), 5, start=100, storage_options=options)
    local = str(tmp_path / 'cache')

    def read(url: str) -> list[list[Any]]:
        dataset = StreamingDataset(remote=url, local=local, batch_size=1, storage_options=options)
        return [[int(s['id']), bytes(s['data']).hex()] for s in dataset]

    assert read(url_a) == expected(list(range(10)))
    write_mds((str(tmp_path / 'out-a2'), url_a), 20, sample_size=40, storage_options=options, exist_ok=True)
    assert read(url_a) == expected(list(range(20)), 40)
    with pytest.raises(CacheRemoteMismatchError) as info:
        read(url_b)
    assert url_a in str(info.value) and url_b in str(info.value)


# ---------------------------------------------------------------------------------------------------------------
def test_streaming_cache_shows_the_remote_each_dataset_holds(tmp_path, capsys):
    from streaming_core.cli import main
    from streaming_core.common.paths import default_local
    remote = write_mds(str(tmp_path / 'remote'), 20)
    explicit = str(tmp_path / 'mine')
    url = f'file://{remote}'
    assert len(list(StreamingDataset(remote=url, batch_size=2))) == 20  # a default local directory
    assert len(list(StreamingDataset(remote=remote, local=explicit, batch_size=2))) == 20
    assert main(['cache', '--json']) == 0
    info = json.loads(capsys.readouterr().out)
    [entry] = info['datasets']
    assert entry['path'] == default_local(url) and entry['remote'] == url
    assert entry['records']['.']['remote_dir'] == url
    by_local = {e['local_dir']: e for e in info['state']['entries']}
    assert by_local[os.path.realpath(explicit)]['remote'] == remote
    assert main(['cache']) == 0
    text = capsys.readouterr().out
    assert f'remote: {url}' in text and f'{os.path.realpath(explicit)}  remote: {remote}' in text
    assert main(['cache', 'clear', '--dataset', url, '--yes']) == 0
    capsys.readouterr()
    assert not os.path.exists(default_local(url)) and record_of(default_local(url)) is None
    assert record_of(explicit) is not None  # another directory's state is kept


def test_a_cache_root_that_cannot_be_created_says_which_variable_to_set(tmp_path, monkeypatch):
    blocker = tmp_path / 'a-file'
    blocker.write_text('not a directory')
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(blocker / 'cache'))
    data = write_mds(str(tmp_path / 'data'), 10)
    with pytest.raises(NotADirectoryError) as caught:  # the same error type as before, with what to do
        StreamingDataset(local=data, batch_size=1)
    message = str(caught.value)
    assert f'cannot create the state directory of {data}' in message
    assert 'set STREAMING_CORE_CACHE_DIR to a writable directory' in message and str(blocker) in message


@pytest.mark.parametrize('stale_version', [True, False])
def test_a_large_copy_of_unknown_provenance_is_checked_by_a_sample_within_the_byte_budget(tmp_path, monkeypatch,
                                                                                        stale_version):
    """Beyond VERIFY_BYTES, adopting a directory hashes a sample spread over its files, not all of them (a job whose
    cache root is temporary adopts its local directory at every start, under the index lock); a stale version is
    caught by the sample (all its files are old) and every kept file is then fetched again."""
    from streaming_core.reading import index_versions
    remote = write_ids(str(tmp_path / 'remote'), list(range(200)), hashes=['sha1'])
    local = str(tmp_path / 'local')
    shutil.copytree(remote, local)
    if stale_version:
        write_ids(local, list(range(1000, 1200)), hashes=['sha1'], exist_ok=True)
        shutil.copy(os.path.join(remote, 'index.json'), os.path.join(local, 'index.json'))
    names = [n for n in os.listdir(local) if n.startswith('shard.')]
    total = sum(os.path.getsize(os.path.join(local, n)) for n in names)
    monkeypatch.setattr(index_versions, 'VERIFY_BYTES', total // 8)
    hashed = []
    real = index_versions._content_matches
    monkeypatch.setattr(index_versions, '_content_matches',
                        lambda path, *info: hashed.append(path) or real(path, *info))
    index = json.load(open(os.path.join(remote, 'index.json')))
    stale, _ = index_versions.compare_versions(index, index, local, verify=True)
    assert 0 < len(hashed) <= len(names) // 4, (len(hashed), len(names))
    assert sorted(map(os.path.basename, stale)) == (sorted(names) if stale_version else [])


def test_the_adoption_sample_hashes_about_the_budget_spread_over_the_whole_directory(monkeypatch):
    """10,000 files of 64 MiB (625 GiB) against 2 GiB: about 2 GiB hashed, from the first files to the last (the
    stride was inverted: 32 files, all among the first tenth)."""
    from streaming_core.reading import index_versions
    size = 64 << 20
    kept = [(f'f{i:05}', (size, {'xxh64': '0'})) for i in range(10_000)]
    hashed = []
    monkeypatch.setattr(index_versions, '_content_matches', lambda path, *info: hashed.append(path) or True)
    assert index_versions._unproven(kept) == []
    assert index_versions.VERIFY_BYTES * 0.8 <= len(hashed) * size <= index_versions.VERIFY_BYTES + size
    assert hashed[0] == 'f00000' and int(hashed[-1][1:]) >= 9_000
