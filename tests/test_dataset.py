"""StreamingDataset on real MDS data: local and remote streams, random access, sizes, errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.errors import UnknownNameError
from streaming_core.reading.cache_record import CacheRemoteMismatchError
from tests.fixtures.data import ids_of, sample, write_mds


def test_local_only_in_order(mds_dir):
    path = mds_dir(100)
    dataset = StreamingDataset(local=path, batch_size=4, num_canonical_nodes=1)
    assert ids_of(dataset) == list(range(100))
    assert dataset.size == 100 and dataset.epoch_size == 100 and len(dataset) == 100
    assert dataset.num_shards > 1


def test_shuffle_is_a_permutation_and_changes_per_epoch(mds_dir):
    dataset = StreamingDataset(local=mds_dir(120), batch_size=4, shuffle=True, num_canonical_nodes=1,
                               shuffle_block_size=30)
    first, second = ids_of(dataset), ids_of(dataset)
    assert sorted(first) == list(range(120)) and sorted(second) == list(range(120))
    assert first != list(range(120)) and first != second


@pytest.mark.parametrize('compression', [None, 'zstd', 'gz'])
def test_remote_directory_downloads_into_local(tmp_path, compression):
    remote = write_mds(str(tmp_path / 'remote'), 50, compression=compression)
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=2)
    assert [s['id'] for s in dataset] == list(range(50))
    assert dataset[7] == sample(7)
    names = sorted(os.listdir(local))
    assert 'index.json' in names
    assert not [n for n in names if n.endswith('.tmp')]
    if compression:  # the compressed copies are dropped once decompressed (remote has them)
        assert not [n for n in names if n.endswith('.' + compression.split(':')[0])]


def test_default_local_under_cache_root_and_shared(tmp_path, monkeypatch):
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root'))
    remote = write_mds(str(tmp_path / 'remote'), 20)
    first = StreamingDataset(remote=remote, batch_size=1)
    second = StreamingDataset(remote=remote, batch_size=1)  # same default directory: no "reused" error
    assert ids_of(first) == ids_of(second) == list(range(20))
    assert first.streams[0].local.startswith(str(tmp_path / 'root'))


def test_default_local_leaves_credentials_out_of_its_name(tmp_path, monkeypatch):
    """A rotated password, another login, or a login moved into storage_options keeps the same cache directory (the
    same remote, as the local directory's record says); nothing else merges (an '@' without a password is part of the
    location in azure-dl://filesystem@account)."""
    from streaming_core.common.paths import default_local
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root'))
    bob = default_local('https://bob@host:8443/data/train')
    assert default_local('https://bob:old@host:8443/data/train') == bob
    assert default_local('https://bob:new%40pw@host:8443/data/train') == bob
    assert default_local('https://alice:pw@host:8443/data/train') == bob == default_local('https://host:8443/data/train')
    assert default_local('https://host:8443/data/val') != bob and default_local('https://other/data/train') != bob
    assert default_local('s3://bucket/a@b') != default_local('s3://bucket/b')  # an '@' in the path is the path's
    assert default_local('azure-dl://fs1@acct.dfs.core.windows.net/train') != \
        default_local('azure-dl://fs2@acct.dfs.core.windows.net/train')


def test_the_default_local_of_a_path_remote_is_that_of_the_directory_it_resolves_to(tmp_path, monkeypatch):
    """``remote='ds'`` from two working directories, or a ``latest`` link moved from v1 to v2, are two datasets, so
    two default caches: each reads its own samples (the name was the text as written, so the second construction
    failed with "holds a copy of ds, not of ds"); the same directory by path, ``file://`` URL or link is one cache."""
    from streaming_core.common.paths import default_local
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root'))
    write_mds(str(tmp_path / 'a' / 'ds'), 20)
    write_mds(str(tmp_path / 'b' / 'ds'), 20, start=500)
    for where, first in (('a', 0), ('b', 500), ('a', 0)):
        monkeypatch.chdir(tmp_path / where)
        assert ids_of(StreamingDataset(remote='ds', batch_size=1)) == list(range(first, first + 20))
    latest = tmp_path / 'latest'
    for version, first in ((tmp_path / 'a' / 'ds', 0), (tmp_path / 'b' / 'ds', 500)):
        if latest.is_symlink():
            latest.unlink()
        latest.symlink_to(version)
        assert ids_of(StreamingDataset(remote=str(latest), batch_size=1)) == list(range(first, first + 20))
        assert default_local(str(latest)) == default_local(str(version)) == default_local(f'file://{version}')
    volume = 'dbfs:/Volumes/main/default/ds'  # a URL with one slash: the same cache from any working directory
    here = default_local(volume)
    monkeypatch.chdir(tmp_path)
    assert default_local(volume) == here
    shared = str(tmp_path / 'shared')  # one explicit `local` for both: refused, and the message says why
    monkeypatch.chdir(tmp_path / 'a')
    assert ids_of(StreamingDataset(remote='ds', local=shared, batch_size=1)) == list(range(20))
    monkeypatch.chdir(tmp_path / 'b')
    with pytest.raises(CacheRemoteMismatchError, match=f'now names the directory {tmp_path / "b" / "ds"}'):
        StreamingDataset(remote='ds', local=shared, batch_size=1)


def test_train_and_val_share_one_cache_directory(tmp_path):
    remote = tmp_path / 'remote'
    write_mds(str(remote / 'train'), 30)
    write_mds(str(remote / 'val'), 10, start=1000)
    train = StreamingDataset(remote=str(remote), local=str(tmp_path / 'c'), split='train', batch_size=1)
    val = StreamingDataset(remote=str(remote), local=str(tmp_path / 'c'), split='val', batch_size=1)
    assert ids_of(val) == list(range(1000, 1010))
    assert ids_of(train) == list(range(30))


def test_random_access_numpy_style(mds_dir):
    dataset = StreamingDataset(local=mds_dir(40), batch_size=1)
    assert dataset[0] == sample(0) and dataset[-1] == sample(39) and dataset[np.int64(5)] == sample(5)
    assert ids_of(dataset[3:9:2]) == [3, 5, 7]
    assert ids_of(dataset[[1, 2, 39]]) == [1, 2, 39]
    assert ids_of(dataset[np.array([4, 0])]) == [4, 0]
    with pytest.raises(IndexError):
        dataset[40]
    with pytest.raises(IndexError):
        dataset[-41]
    with pytest.raises(ValueError, match='Unsupported argument type'):
        dataset['x']


def test_unknown_algorithms_fail_at_construction(mds_dir):
    path = mds_dir(10)
    with pytest.raises(UnknownNameError, match='shuffle algorithm'):
        StreamingDataset(local=path, shuffle_algo='py9z', batch_size=1)
    with pytest.raises(UnknownNameError, match='batching method'):
        StreamingDataset(local=path, batching_method='nope', batch_size=1)
    with pytest.raises(ValueError, match='partition_algo'):
        StreamingDataset(local=path, partition_algo='nope', batch_size=1)


def test_argument_validation_messages(mds_dir):
    path = mds_dir(10)
    with pytest.raises(ValueError, match='either `streams` or `remote`/`local`'):
        StreamingDataset(streams=[Stream(local=path)], local=path)
    with pytest.raises(ValueError, match='Invalid sampling method'):
        StreamingDataset(local=path, sampling_method='x')
    with pytest.raises(ValueError, match='sampling_granularity'):
        StreamingDataset(local=path, sampling_granularity=0)
    with pytest.raises(ValueError, match='Epoch size cannot be negative'):
        StreamingDataset(local=path, epoch_size=-5)
    with pytest.raises(ValueError, match='shuffle_seed'):
        StreamingDataset(local=path, shuffle_seed=-1)
    with pytest.raises(ValueError, match='At most one of'):
        Stream(local=path, proportion=0.5, repeat=2)
    with pytest.raises(ValueError, match='Replication factor must be positive'):
        StreamingDataset(local=path, replication=0)


def test_numpy_integer_batch_size_is_accepted(mds_dir):
    dataset = StreamingDataset(local=mds_dir(10), batch_size=np.int64(2))
    assert ids_of(dataset) == list(range(10))


def test_epoch_size_and_len_per_device(mds_dir, monkeypatch):
    path = mds_dir(100)
    dataset = StreamingDataset(local=path, epoch_size='50', batch_size=1)
    assert dataset.epoch_size == 50 and len(dataset) == 50
    monkeypatch.setenv('WORLD_SIZE', '4')
    assert len(dataset) == 13  # ceil(50 / 4): len is per device


def test_ncn_padding_yields_more_than_len(mds_dir):
    dataset = StreamingDataset(local=mds_dir(117), batch_size=1, num_canonical_nodes=8)
    ids = ids_of(dataset)
    assert len(dataset) == 117 and len(ids) == 120  # ceil(117 / 8) * 8, the reference's behaviour
    assert set(ids) == set(range(117))


def test_missing_index_without_remote(tmp_path):
    from streaming_core.reading.stream import MissingIndexError
    with pytest.raises(MissingIndexError, match='does not exist'):
        StreamingDataset(local=str(tmp_path / 'nothing'), batch_size=1)
    assert issubclass(MissingIndexError, FileNotFoundError)


def test_corrupt_index_is_a_clear_error(tmp_path):
    from streaming_core.errors import IndexFormatError
    (tmp_path / 'index.json').write_text('{"shards": [], "version": 3}')
    with pytest.raises(IndexFormatError, match='Unsupported streaming data version'):
        StreamingDataset(local=str(tmp_path), batch_size=1)
    (tmp_path / 'index.json').write_text('')
    with pytest.raises(IndexFormatError, match='empty or corrupted'):
        StreamingDataset(local=str(tmp_path), batch_size=1)
    (tmp_path / 'index.json').write_text('{"shards": [], "version": 2}')
    with pytest.raises(RuntimeError, match='Stream contains no samples'):
        StreamingDataset(local=str(tmp_path), batch_size=1)


def test_deleted_shard_is_downloaded_again(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=1)
    assert ids_of(dataset) == list(range(40))
    for name in os.listdir(local):
        if name.startswith('shard.'):
            os.remove(local / name)
    fresh = StreamingDataset(remote=remote, local=str(local), batch_size=1)
    assert ids_of(fresh) == list(range(40))
    assert fresh[39] == sample(39)


def test_repr_has_no_secrets(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 5)
    stream = Stream(remote='https://user:hunter2@example.invalid/data', local=str(tmp_path / 'c'))
    signed = Stream(remote='s3://bucket/data?X-Amz-Signature=abcdef', local=str(tmp_path / 'c'))
    assert 'hunter2' not in repr(stream) and 'abcdef' not in repr(signed)
    with pytest.raises(ValueError, match='query string') as info:  # an http(s) remote cannot carry a query
        Stream(remote='https://user:hunter2@example.invalid/data?X-Amz-Signature=abcdef', local=str(tmp_path / 'c'))
    assert 'hunter2' not in str(info.value) and 'abcdef' not in str(info.value)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'c2'), batch_size=1)
    assert 'streams=' in repr(dataset)


def test_length_is_the_references_attribute_and_a_subclass_may_set_its_own(tmp_path, monkeypatch):
    """``dataset.length`` is ``len(dataset)`` (per device: ``ceil(epoch_size / ranks)``), as the reference sets it; a
    subclass assigning ``self.length`` keeps its value."""
    remote = write_mds(str(tmp_path / 'remote'), 45)
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setenv('RANK', '1')
    dataset = StreamingDataset(local=remote, batch_size=1)
    assert dataset.length == len(dataset) == 23

    class Own(StreamingDataset):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.length = 5

    assert Own(local=remote, batch_size=1).length == 5


def test_storage_options_travel_in_a_pickle_and_never_in_a_state_dict(tmp_path):
    """As docs/storage/index.md says: a spawned worker needs the options (secrets included); a state dict, which
    checkpoints hold, never has them."""
    import pickle
    remote = write_mds(str(tmp_path / 'remote'), 8)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'c'), batch_size=2,
                               storage_options={'token': 'SECRET-7f3a'})
    assert next(iter(dataset))['id'] == 0
    assert 'SECRET-7f3a' not in repr(dataset.state_dict()) and 'SECRET-7f3a' not in repr(dataset)
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.streams[0].storage_options == {'token': 'SECRET-7f3a'}


@pytest.mark.parametrize('size_limit', [1 << 10, 1 << 14])  # per-sample loop; long same-shard stretches
def test_random_access_while_iterating_never_closes_the_shard_being_read(mds_dir, size_limit):
    path = mds_dir(400, size_limit=size_limit)
    dataset = StreamingDataset(local=path, batch_size=4, max_open_shards=2)
    other = list(range(0, 400, 7))
    seen = []
    for n, item in enumerate(dataset):
        seen.append(item['id'])
        if n % 5 == 0:  # touch many other shards: views beyond max_open are trimmed, but not the held one
            assert dataset[other[n % len(other)]]['id'] == other[n % len(other)]
            assert dataset[other[(n + 3) % len(other)]]['id'] == other[(n + 3) % len(other)]
        if n % 50 == 0:
            for shard in range(dataset.num_shards):
                dataset.evict_shard(shard)  # no remote copy: a no-op that must not disturb the iteration
    assert seen == list(range(400))
