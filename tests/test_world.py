"""World detection at iteration time, explicit worlds, replication, and the dataset's layout attributes."""

from __future__ import annotations

import numpy as np
import pytest

from streaming_core import Stream, StreamingDataset, World
from tests.fixtures.data import ids_of, write_mds


def _plan_ids(plan, node, rank, worker=0):
    ids = plan[node, rank, worker].reshape(-1)
    return ids[ids >= 0].tolist()


def test_world_validation_and_derived_fields():
    world = World(rank=5, world_size=8, local_world_size=4, worker=1, workers_per_rank=2)
    assert (world.num_nodes, world.node, world.rank_of_node, world.global_worker) == (2, 1, 1, 11)
    assert world.worker_of_node == 3 and world.workers_per_node == 8 and not world.is_local_leader
    with pytest.raises(ValueError, match='multiple of'):
        World(rank=0, world_size=6, local_world_size=4)
    with pytest.raises(ValueError, match='rank must be in'):
        World(rank=3, world_size=3)
    assert World(rank=3, world_size=8).replicate(4) == World(rank=0, world_size=2)


def test_dataset_built_before_the_launcher_sets_the_variables(mds_dir, monkeypatch):
    path = mds_dir(40)
    dataset = StreamingDataset(local=path, batch_size=2, num_canonical_nodes=1)  # built as a single process
    expected = dataset.get_plan(World(rank=1, world_size=2), epoch=0)
    monkeypatch.setenv('RANK', '1')
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setenv('LOCAL_WORLD_SIZE', '1')
    assert ids_of(dataset) == _plan_ids(expected, 1, 0)
    assert len(dataset) == 20


def test_explicit_world_overrides_the_environment(mds_dir, monkeypatch):
    path = mds_dir(40)
    monkeypatch.setenv('RANK', '0')
    monkeypatch.setenv('WORLD_SIZE', '8')
    world = World(rank=2, world_size=4, local_world_size=2)
    dataset = StreamingDataset(local=path, batch_size=2, num_canonical_nodes=2, shuffle=True, world=world)
    plan = dataset.get_plan(world, epoch=0)
    assert ids_of(dataset) == _plan_ids(plan, 1, 0)
    assert len(dataset) == 10


def test_ranks_of_a_world_cover_the_epoch_exactly_once(mds_dir):
    path = mds_dir(48)
    seen = []
    for rank in range(4):
        world = World(rank=rank, world_size=4, local_world_size=2)
        seen += ids_of(StreamingDataset(local=path, batch_size=3, num_canonical_nodes=2, shuffle=True, world=world))
    assert sorted(seen) == list(range(48))


def test_replication_gives_consecutive_ranks_identical_samples(mds_dir):
    path = mds_dir(48)
    per_rank = []
    for rank in range(4):
        world = World(rank=rank, world_size=4, local_world_size=4)
        per_rank.append(ids_of(StreamingDataset(local=path, batch_size=4, num_canonical_nodes=1, shuffle=True,
                                                replication=2, world=world)))
    assert per_rank[0] == per_rank[1] and per_rank[2] == per_rank[3] and per_rank[0] != per_rank[2]
    assert sorted(per_rank[0] + per_rank[2]) == list(range(48))
    with pytest.raises(ValueError, match='divisible by your replication factor'):
        ids_of(StreamingDataset(local=path, batch_size=4, replication=3, world=World(rank=0, world_size=4)))


@pytest.mark.parametrize('world_size', [2, 4])
def test_a_state_after_the_last_batch_of_an_epoch_with_replication(mds_dir, world_size):
    """replication=2: the state after the whole epoch is the start of the next one (it raised "World size must be
    divisible by your replication factor" with one data-parallel group, replicating the world twice), and the next
    iteration reads the next epoch exactly as an uninterrupted run does."""
    path = mds_dir(40)
    world = World(rank=0, world_size=world_size, local_world_size=world_size)

    def dataset():
        return StreamingDataset(local=path, batch_size=5, num_canonical_nodes=1, shuffle=True, replication=2,
                                world=world)
    uninterrupted = dataset()
    first, second = ids_of(uninterrupted), ids_of(uninterrupted)
    groups = world_size // 2
    assert len(first) == 40 // groups and first != second
    saved = dataset()
    assert ids_of(saved) == first
    state = saved.state_dict(40, True)  # every sample of the epoch consumed by the whole world
    assert (state['epoch'], state['sample_in_epoch']) == (1, 0)
    resumed = dataset()
    resumed.load_state_dict(state)
    assert ids_of(resumed) == second


def test_layout_attributes(tmp_path):
    first = write_mds(str(tmp_path / 'a'), 30, size_limit=1 << 9)
    second = write_mds(str(tmp_path / 'b'), 10, start=100, size_limit=1 << 9)
    dataset = StreamingDataset(streams=[Stream(local=first), Stream(local=second, repeat=2)], batch_size=1)
    assert dataset.num_streams == 2 and dataset.size == 40 and dataset.epoch_size == 50
    assert dataset.samples_per_stream.tolist() == [30, 10]
    assert dataset.shards_per_stream.sum() == dataset.num_shards == len(dataset.samples_per_shard)
    assert dataset.shard_offset_per_stream.tolist() == [0, int(dataset.shards_per_stream[0])]
    assert dataset.stream_per_shard.tolist() == [0] * int(dataset.shards_per_stream[0]) + [1] * int(
        dataset.shards_per_stream[1])
    assert int(np.sum(dataset.samples_per_shard)) == 40
    shard, index = dataset.spanner[35]
    assert dataset.stream_per_shard[shard] == 1
    assert dataset.get_item(35)['id'] == 105
    assert [s.choose for s in dataset.streams] == [30, 20] and dataset.streams[1].repeat == 2.0
    walk = ids_of(dataset)
    assert sorted(walk) == sorted(list(range(30)) + 2 * list(range(100, 110)))
    dataset.prepare_shard(0)


@pytest.mark.parametrize(('ranks', 'workers', 'batch', 'planned'), [(16, 1, 1, 1008), (3, 2, 4, 1002), (8, 1, 1, 1000)])
def test_ranks_that_do_not_divide_the_epoch_read_a_few_samples_twice(tmp_path, ranks, workers, batch, planned):
    """What docs/guide/distributed.md says: 1,000 samples on 16 ranks plan 1,008 (8 twice), on 3 ranks 1,002, on 8
    none twice; an epoch_size that is a multiple of the ranks plans no sample twice."""
    data = write_mds(str(tmp_path / 'data'), 1000)
    world = World(rank=0, world_size=ranks, local_world_size=min(ranks, 8), workers_per_rank=workers)
    plan = StreamingDataset(local=data, batch_size=batch, shuffle=True).get_plan(world, epoch=0)
    ids = plan[plan >= 0]
    assert len(ids) == planned and len(np.unique(ids)) == 1000
    even = 1000 // ranks * ranks
    plan = StreamingDataset(local=data, batch_size=batch, shuffle=True, epoch_size=even).get_plan(world, epoch=0)
    ids = plan[plan >= 0]
    assert len(ids) == even == len(np.unique(ids))
