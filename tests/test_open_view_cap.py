"""A process keeps a bounded number of shard views open (each is a file descriptor and a memory map): a shuffled
epoch over more shards than ``ulimit -n`` allows, with no cache limit, reads every sample once, in the order of an
uninterrupted run with a high limit, in the main process and in DataLoader workers. Before the cap, an iterator held
every shard of a shuffled epoch open until its last use and failed with "Too many open files" past ~1,000 shards
under the common default soft limit of 1,024."""

from __future__ import annotations

import textwrap

import pytest

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.reading.shard_manager import open_view_cap
from tests.fixtures.child_report import child_report
from tests.fixtures.data import write_mds

LIMIT = 128  # the child's soft RLIMIT_NOFILE: far fewer descriptors than shards

CHILD = '''
import json, os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.reading.shard_manager import open_view_cap
dataset = StreamingDataset(local={data!r}, shuffle=True, shuffle_seed=5, batch_size=4)
peak = 0
ids = []
for sample in dataset:
    ids.append(int(sample['id']))
    if len(ids) % 500 == 0:
        peak = max(peak, len(os.listdir('/proc/self/fd')))
fresh = StreamingDataset(local={data!r}, shuffle=True, shuffle_seed=5, batch_size=4)  # epoch 0 again
loader = StreamingDataLoader(fresh, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
workers = [int(s['id']) for batch in loader for s in batch]
print(json.dumps({{'ids': ids, 'workers': workers, 'peak': peak, 'cap': open_view_cap(),
                   'shards': dataset.num_shards}}))
'''


def test_the_cap_follows_the_descriptor_limit() -> None:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert open_view_cap() <= max(64, soft // 2)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        assert open_view_cap() == 128
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, hard))
        assert open_view_cap() == 64  # the floor
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
def test_a_shuffled_epoch_over_more_shards_than_descriptors(tmp_path) -> None:
    data = write_mds(str(tmp_path / 'ds'), 4800, size_limit=400, sample_size=16)  # 800 shards of 6 samples
    expected = [int(s['id']) for s in StreamingDataset(local=data, shuffle=True, shuffle_seed=5, batch_size=4)]
    loader = StreamingDataLoader(StreamingDataset(local=data, shuffle=True, shuffle_seed=5, batch_size=4),
                                 batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    expected_workers = [int(s['id']) for batch in loader for s in batch]
    report = child_report(textwrap.dedent(CHILD.format(limit=LIMIT, data=data)), str(tmp_path / 'cache'))
    assert report['shards'] > 5 * LIMIT
    assert report['cap'] == 64 and report['peak'] < LIMIT
    assert report['ids'] == expected and sorted(expected) == list(range(4800))
    assert report['workers'] == expected_workers


@pytest.mark.parametrize('cache_limit', [None, '10mb'])
def test_the_cap_closes_the_oldest_views_but_never_unpins_a_held_one(tmp_path, cache_limit) -> None:
    """Past the cap the oldest views close, held ones included, except a held view pinned against eviction (a
    remote stream under a cache limit): closing it would make a file the iterator still reads evictable."""
    remote = write_mds(str(tmp_path / 'remote'), 60, size_limit=400, sample_size=16)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4, cache_limit=cache_limit)
    manager = dataset.shard_manager
    manager._check_pid()
    manager._view_cap = 2
    manager.hold(0)
    manager.open(0)
    manager.open(1)
    manager.open(2)  # over the cap: the oldest not protected goes
    manager.open(3)
    if cache_limit is None:
        assert list(manager.open_views) == [2, 3]
    else:
        assert manager.evictable(0) and list(manager.open_views) == [0, 3]  # 0 stays open, pinned
    assert manager.view(1)[0]['id'] is not None  # a closed view is opened again when read
    manager.release(0)
    manager.close_all()
