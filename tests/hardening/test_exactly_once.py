"""Exactly-once accounting under load: 2 simulated nodes x 2 ranks x 2 DataLoader workers (8 readers), shuffled,
several epochs, a remote stream on the loopback S3 server and a local-only stream, under a cache limit that keeps
evicting. Every epoch, every sample is delivered exactly as many times as the epoch plan says, with the right
bytes; every rank takes the same number of steps; the local-only stream's files are untouched.
"""

from __future__ import annotations

import collections
import hashlib
import os
import shutil
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset, World
from tests.fixtures.data import write_mds
from tests.hardening.conftest import S3Place
from tests.hardening.harness import Job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

NODES, RANKS_PER_NODE, WORKERS = 2, 2, 2
REMOTE_SAMPLES, LOCAL_SAMPLES, LOCAL_START = 480, 120, 10_000
EPOCHS = 3


def snapshot(directory: str) -> dict[str, str]:
    """``name -> sha1`` of the dataset files of a directory (hidden coordination files excluded)."""
    out = {}
    for name in sorted(os.listdir(directory)):
        if not name.startswith('.'):
            with open(os.path.join(directory, name), 'rb') as handle:
                out[name] = hashlib.sha1(handle.read()).hexdigest()
    return out


def data_ids(plan: Any) -> collections.Counter:
    """The multiset of data ids an epoch plan delivers (global ids mapped to each stream's ``id`` column)."""
    ids = plan[plan >= 0].ravel().tolist()
    return collections.Counter(i if i < REMOTE_SAMPLES else LOCAL_START + i - REMOTE_SAMPLES for i in ids)


def test_every_sample_exactly_as_planned_under_eviction(tmp_path: Any, s3: S3Place, fault_proxy: Any) -> None:
    write_mds(s3.url('remote'), REMOTE_SAMPLES, sample_size=64, size_limit=1 << 10, storage_options=s3.options)
    local_source = write_mds(str(tmp_path / 'local-only'), LOCAL_SAMPLES, start=LOCAL_START, sample_size=64,
                             size_limit=1 << 10)
    for node in range(NODES):  # each node has its own copy of the local-only data
        shutil.copytree(local_source, tmp_path / f'node{node}-local-only')
    before = {node: snapshot(str(tmp_path / f'node{node}-local-only')) for node in range(NODES)}
    proxy = fault_proxy(s3.server)  # pass-through: counts the shard downloads

    args: dict[str, Any] = {'batch_size': 6, 'shuffle': True, 'shuffle_seed': 17, 'num_canonical_nodes': 2,
                            'shuffle_block_size': 90, 'download_timeout': 20, 'download_retry': 2, 'predownload': 12}
    reference = StreamingDataset(streams=[Stream(remote=s3.url('remote'), local=str(tmp_path / 'plan-remote'),
                                                 storage_options=s3.options),
                                          Stream(local=local_source, repeat=1.5)], **args)
    remote_shards = [r for r, s in zip(reference.shards, reference.stream_per_shard.tolist()) if s == 0]
    local_shards = [r for r, s in zip(reference.shards, reference.stream_per_shard.tolist()) if s == 1]
    index_bytes = reference._index_bytes
    largest = max(r.max_size for r in remote_shards)
    cache_limit = index_bytes + sum(r.max_size for r in local_shards) + 6 * largest  # 6 of ~40 remote shards
    world = World(rank=0, world_size=NODES * RANKS_PER_NODE, local_world_size=RANKS_PER_NODE,
                  workers_per_rank=WORKERS)
    plans = [reference.get_plan(world, epoch) for epoch in range(EPOCHS)]

    def config(node: int) -> dict[str, Any]:
        return {'streams': [{'remote': s3.url('remote'), 'local': str(tmp_path / f'node{node}-remote'),
                             'storage_options': s3.via(proxy.url)},
                            {'local': str(tmp_path / f'node{node}-local-only'), 'repeat': 1.5}],
                'dataset': {**args, 'cache_limit': cache_limit}, 'workers': WORKERS, 'epochs': EPOCHS,
                'check_data': True}

    results = Job(str(tmp_path), NODES, RANKS_PER_NODE, config).results(timeout=300)

    for epoch in range(EPOCHS):
        steps = {len(r['epochs'][str(epoch)]) for r in results}
        assert len(steps) == 1, f'epoch {epoch}: ranks took different numbers of steps: {steps}'
        delivered = collections.Counter(i for r in results for batch in r['epochs'][str(epoch)] for i in batch)
        expected = data_ids(plans[epoch])
        assert delivered == expected, (f'epoch {epoch}: missing {dict(expected - delivered)}, '
                                       f'extra {dict(delivered - expected)}')
        assert max(expected.values()) >= 2  # the repeated stream really delivers some samples twice
    assert [r['mismatches'] for r in results] == [[]] * len(results), 'a sample came back with the wrong bytes'
    assert plans[0].tolist() != plans[1].tolist()  # shuffled differently each epoch

    for node in range(NODES):
        assert snapshot(str(tmp_path / f'node{node}-local-only')) == before[node], 'local-only data changed'
        remote_dir = tmp_path / f'node{node}-remote'
        held = sum(os.path.getsize(remote_dir / name) for name in os.listdir(remote_dir) if name.startswith('shard.'))
        in_cache = held + index_bytes + sum(r.max_size for r in local_shards)
        assert in_cache <= cache_limit, (f'node {node} holds {in_cache} bytes under a cache limit of {cache_limit}: '
                                         f'{sorted(os.listdir(remote_dir))}')
    downloads = proxy.count(method='GET', path=r'/shard\.')
    at_least = 2 * NODES * len(remote_shards)  # each shard fetched twice per node on average: evictions happened
    assert downloads >= at_least, f'{downloads} shard downloads: the cache limit did not force evictions'


@pytest.mark.filterwarnings('ignore:cache_limit')
def test_a_live_reservation_is_never_dropped(tmp_path: Any) -> None:
    """White-box regression test: reservations whose owners are alive and have not committed yet (here held open by
    calling ``CacheState.reserve`` directly) fill the limit; a third must wait and time out, never take their room
    (a live reservation used to be dropped as dead before its owner locked the shard, so two nodes' worth of
    downloads could pass ``cache_limit``)."""
    from streaming_core.errors import CacheLimitError
    remote = write_mds(str(tmp_path / 'remote'), 100, sample_size=64, size_limit=1 << 10)
    probe = StreamingDataset(remote=remote, local=str(tmp_path / 'probe'), batch_size=1)
    size = max(r.max_size for r in probe.shards)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=1,
                               cache_limit=probe._index_bytes + 2 * size)
    cache = dataset._shards_manager.cache
    cache.timeout = 1.0
    cache.reserve(0, size)  # "process A", between its reservation and its prepare lock
    cache.reserve(1, size)  # "process B", likewise
    with pytest.raises(CacheLimitError):
        cache.reserve(2, size)
