"""cache_limit: node-wide LRU eviction that never evicts data without a remote copy."""

from __future__ import annotations

import os
import re

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.errors import CacheLimitError
from tests.fixtures.data import ids_of, sample, write_mds


def _shard_bytes(directory):
    total = 0
    for name in os.listdir(directory):
        if name.startswith('shard.'):
            total += os.path.getsize(os.path.join(directory, name))
    return total


def test_eviction_keeps_usage_under_the_limit(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 400, size_limit=1 << 10, sample_size=64)
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=4, cache_limit='24kb', shuffle=True,
                               num_canonical_nodes=1, shuffle_block_size=50)
    assert sorted(ids_of(dataset)) == list(range(400))
    index_bytes = os.path.getsize(local / 'index.json')
    assert _shard_bytes(local) <= 24 * 1024 - index_bytes
    assert dataset.cache_usage <= 24 * 1024
    remote_shards = [n for n in os.listdir(remote) if n.startswith('shard.')]
    local_shards = [n for n in os.listdir(local) if n.startswith('shard.')]
    assert len(local_shards) < len(remote_shards)
    assert sorted(ids_of(dataset)) == list(range(400))  # a second epoch downloads evicted shards again


def test_local_only_stream_is_never_evicted(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 200, size_limit=1 << 10, sample_size=64)
    local_only = write_mds(str(tmp_path / 'localonly'), 50, start=10_000, size_limit=1 << 10, sample_size=64)
    before = sorted(os.listdir(local_only))
    streams = [Stream(remote=remote, local=str(tmp_path / 'cache')), Stream(local=local_only)]
    local_bytes = _shard_bytes(local_only)
    dataset = StreamingDataset(streams=streams, batch_size=4, cache_limit=local_bytes + 20 * 1024, shuffle=True,
                               num_canonical_nodes=1)
    for _ in range(2):
        assert sorted(ids_of(dataset)) == sorted(list(range(200)) + list(range(10_000, 10_050)))
    assert sorted(os.listdir(local_only)) == before
    for shard in range(dataset.num_shards):
        dataset.evict_shard(shard)
    assert sorted(os.listdir(local_only)) == before
    assert dataset[200] == sample(10_000, 64)


def test_limit_below_the_largest_shard_fails_at_construction(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 100, size_limit=1 << 12, sample_size=64)
    with pytest.raises(CacheLimitError, match='must be at least') as info:
        StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1, cache_limit=2000)
    need = int(re.search(r'at least (\d+) bytes', str(info.value)).group(1))
    index_size = os.path.getsize(os.path.join(remote, 'index.json'))
    for limit in (10, index_size):  # below the index files, and equal to them: the same need, whatever the limit
        with pytest.raises(CacheLimitError, match=rf'Minimum cache usage \({index_size} bytes, the index files\) '
                                                  rf'leaves no room .*must be at least {need} bytes'):
            StreamingDataset(remote=remote, local=str(tmp_path / f'cache-{limit}'), batch_size=1, cache_limit=limit)
    assert len(StreamingDataset(remote=remote, local=str(tmp_path / 'enough'), batch_size=1,
                                cache_limit=need)) == 100


def test_manual_eviction_and_redownload(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60, compression='zstd')
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=1)
    for shard in range(dataset.num_shards):
        dataset.prepare_shard(shard)
    assert any(n.startswith('shard.') for n in os.listdir(local))
    for shard in range(dataset.num_shards):
        dataset.evict_shard(shard)
    assert not [n for n in os.listdir(local) if n.startswith('shard.')]
    assert [dataset[i]['id'] for i in range(60)] == list(range(60))


def test_keep_zip(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 30, compression='zstd')
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=1, keep_zip=True)
    assert ids_of(dataset) == list(range(30))
    names = os.listdir(local)
    assert any(n.endswith('.mds.zstd') for n in names) and any(n.endswith('.mds') for n in names)


def test_local_zip_only_dataset_is_decompressed_in_place_and_zip_kept(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 30, compression='zstd')
    dataset = StreamingDataset(local=path, batch_size=1)
    assert ids_of(dataset) == list(range(30))
    names = os.listdir(path)
    assert any(n.endswith('.mds.zstd') for n in names)  # no other copy: never deleted


@pytest.mark.parametrize('order', ['sequential', 'random'])
def test_random_access_under_a_small_cache_limit_evicts_its_own_views(tmp_path, order):
    # ds[i] keeps views open (pinned) for speed; under a cache limit they must give way to the next shard instead
    # of failing with CacheLimitError once the cache is full of them.
    remote = write_mds(str(tmp_path / 'remote'), 400, size_limit=1 << 10, sample_size=64)
    local = tmp_path / 'cache'
    dataset = StreamingDataset(remote=remote, local=str(local), batch_size=4, cache_limit='20kb')
    ids = list(range(400))
    if order == 'random':
        import random
        random.Random(0).shuffle(ids)
    for i in ids:
        assert dataset[i] == sample(i, 64)
    assert _shard_bytes(local) <= 20 * 1024 - os.path.getsize(local / 'index.json')


def test_a_download_waiting_for_room_warns_why_then_fails(tmp_path, monkeypatch):
    # Every shard that fits is held by a reader of this node: say so early (a warning), fail at the timeout.
    from streaming_core.reading import cache_limit
    monkeypatch.setattr(cache_limit, 'WAIT_WARNING_AFTER', 0.2)
    remote = write_mds(str(tmp_path / 'remote'), 100, size_limit=1 << 10, sample_size=64)
    local = tmp_path / 'cache'
    index_bytes = os.path.getsize(os.path.join(remote, 'index.json'))
    largest = max(os.path.getsize(os.path.join(remote, n)) for n in os.listdir(remote) if n.startswith('shard.'))
    with pytest.warns(UserWarning, match='below four times the largest shard'):
        dataset = StreamingDataset(remote=remote, local=str(local), batch_size=4,
                                   cache_limit=index_bytes + largest + largest // 2)
    manager = dataset.shard_manager
    manager.cache.timeout = 1.0
    manager.open(0)  # a reader holds shard 0: nothing can be evicted for shard 1
    with pytest.warns(RuntimeWarning, match='Waiting .* for room in the cache for shard 1 .* Raise cache_limit'):
        with pytest.raises(CacheLimitError, match='cannot fit shard 1'):
            manager.prepare(1)


def test_a_prefetchers_impatience_is_not_the_readers_error(tmp_path):
    # A prefetch thread prepares a shard with a short patience and gives up while the cache is full; the reading
    # loop, waiting on that same preparation, must then prepare it itself (room comes later), not re-raise the
    # prefetcher's CacheLimitError.
    import threading
    import time
    remote = write_mds(str(tmp_path / 'remote'), 100, size_limit=1 << 10, sample_size=64)
    index_bytes = os.path.getsize(os.path.join(remote, 'index.json'))
    largest = max(os.path.getsize(os.path.join(remote, n)) for n in os.listdir(remote) if n.startswith('shard.'))
    with pytest.warns(UserWarning, match='below four times the largest shard'):
        dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4,
                                   cache_limit=index_bytes + largest + largest // 2)
    manager = dataset.shard_manager
    manager.open(0)  # holds the only room
    failures = []

    def prefetch():
        try:
            manager.prepare(1, patience=0.3)
        except CacheLimitError as err:
            failures.append(err)
    prefetcher = threading.Thread(target=prefetch)
    prefetcher.start()
    time.sleep(0.1)  # the prefetcher owns the preparation and waits for room
    threading.Timer(0.8, manager.close, args=(0,)).start()  # room comes after the prefetcher gave up
    manager.prepare(1)  # the loop's own call, with the cache's full patience
    prefetcher.join()
    assert failures, 'the prefetcher gave up first'
    assert manager.is_ready(1)


def test_random_access_from_several_threads_under_a_small_cache_limit(tmp_path):
    # A thread making room closes other views; a view another thread is reading a sample through must stay readable.
    import random
    import threading
    remote = write_mds(str(tmp_path / 'remote'), 400, size_limit=1 << 10, sample_size=64)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4, cache_limit='20kb')
    errors = []

    def read(seed):
        ids = list(range(400))
        random.Random(seed).shuffle(ids)
        try:
            for i in ids:
                assert dataset[i] == sample(i, 64)
        except Exception as err:  # noqa: BLE001 - reported below with its thread
            errors.append(f'thread {seed}: {type(err).__name__}: {err}')
    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]


def test_a_path_and_its_file_url_share_one_default_cache(tmp_path, monkeypatch):
    """``/data/ds`` and ``file:///data/ds`` are the same remote (docs/guide/cache.md): without ``local`` they get one
    default local directory, so the data is downloaded once."""
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root'))
    remote = write_mds(str(tmp_path / 'remote'), 20)
    by_path = StreamingDataset(remote=remote, batch_size=4)
    by_url = StreamingDataset(remote='file://' + remote, batch_size=4)
    assert by_path.streams[0].local_dir == by_url.streams[0].local_dir
    assert sorted(int(s['id']) for s in by_url) == list(range(20))


def test_datasets_over_the_same_streams_share_one_account_others_do_not(tmp_path):
    """docs/guide/reading.md: processes of datasets over the same streams share one cache account (each sees the
    other's downloads); a dataset over another set of streams sharing a directory keeps its own."""
    x = write_mds(str(tmp_path / 'x'), 200, size_limit=1 << 10, sample_size=64)
    y = write_mds(str(tmp_path / 'y'), 100, start=1000, size_limit=1 << 10, sample_size=64)
    local_x, local_y = str(tmp_path / 'lx'), str(tmp_path / 'ly')

    def make(*pairs):
        return StreamingDataset(streams=[Stream(remote=r, local=loc) for r, loc in pairs], batch_size=4,
                                cache_limit='60kb')
    a, same = make((x, local_x)), make((x, local_x))
    other = make((x, local_x), (y, local_y))
    before = other.cache_usage
    assert same.cache_usage == a.cache_usage == before - os.path.getsize(os.path.join(local_y, 'index.json'))
    assert sorted(ids_of(a)) == list(range(200))
    assert same.cache_usage == a.cache_usage > before  # one account: the other dataset's downloads are counted
    assert other.cache_usage == before  # its own account: it counted what was on disk when it started


def test_cache_usage_without_a_limit_counts_the_files_on_disk(tmp_path):
    """The reference's ``cache_usage`` is what the local directory holds: without a cache limit it counted only the
    index here (6746 bytes after an epoch that put 89794 on disk)."""
    remote = write_mds(str(tmp_path / 'remote'), 300, size_limit=2048)
    local = str(tmp_path / 'local')
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    index = os.path.getsize(os.path.join(local, 'index.json'))
    assert dataset.cache_usage == index
    dataset[0]
    assert dataset.cache_usage == index + _shard_bytes(local) > index
    assert len(ids_of(dataset)) == 300
    on_disk = sum(os.path.getsize(os.path.join(local, name)) for name in os.listdir(local))
    assert dataset.cache_usage == on_disk
    assert StreamingDataset(local=remote, batch_size=4).cache_usage == on_disk  # read in place: all of it


def test_shards_a_job_without_a_limit_downloaded_are_counted_and_evicted_by_the_next_limited_job(tmp_path):
    """The account of a dataset with a ``cache_limit`` is recounted from the disk only when it is new: the shards a
    job without a limit downloaded into the same directory since were neither counted nor evicted, and the limit
    was passed for good (review of the stat-trust family). They are counted when read, and cold ones evicted."""
    remote = write_mds(str(tmp_path / 'remote'), 160, size_limit=1 << 13, sample_size=1000)
    local = str(tmp_path / 'local')

    def on_disk() -> int:
        return sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local) if n.startswith('shard.'))

    def run(limit):
        dataset = StreamingDataset(remote=remote, local=local, batch_size=1, shuffle=False, cache_limit=limit)
        assert ids_of(dataset) == list(range(160))
        return dataset

    largest = max(r.max_size for r in run(None).shards)
    for name in os.listdir(local):
        if name.startswith('shard.'):
            os.remove(os.path.join(local, name))
    limit = 6 * largest
    first = run(limit)
    assert first.cache_usage <= limit and on_disk() <= limit
    del first
    run(None)  # every shard downloaded, none counted
    assert on_disk() > 2 * limit
    third = run(limit)
    assert third.cache_usage <= limit and on_disk() <= limit
