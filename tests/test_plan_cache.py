"""The node's epoch-plan cache (``ordering/plan_cache.py``): a plan is computed once per node, by one process, and
mapped by the others; a damaged file is computed again, never trusted; every input changes the key."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass, field

import numpy as np
import pytest

from streaming_core.ordering import plan_cache
from streaming_core.ordering.world import World


@dataclass
class CountingPlanner:
    """A planner whose plan is a function of its inputs, recording each computation in ``log`` (a file)."""

    seed: int
    log: str
    delay: float = 0.0
    weights: np.ndarray = field(default_factory=lambda: np.arange(3))
    warned: list = field(default_factory=list)

    def plan_node(self, world, epoch, sample_in_epoch, node):
        import time
        with open(self.log, 'a') as handle:
            handle.write(f'{os.getpid()}\n')
        time.sleep(self.delay)
        shape = (world.ranks_per_node, world.workers_per_rank, 3, 2)
        return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) + self.seed + 1000 * epoch

    def warn(self, stacklevel=1):
        self.warned.append(stacklevel)


def _computations(log):
    return len(open(log).read().split()) if os.path.exists(log) else 0


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'cache'))
    return tmp_path / 'cache'


def test_a_plan_is_computed_once_and_then_mapped(cache_root, tmp_path):
    world = World(world_size=2, local_world_size=2, workers_per_rank=2)
    planner = CountingPlanner(seed=7, log=str(tmp_path / 'log'))
    first = plan_cache.node_plan(planner, world, 0, 0, 0)
    again = plan_cache.node_plan(planner, world, 0, 0, 0)
    assert _computations(planner.log) == 1
    assert np.array_equal(first, again) and isinstance(again, np.memmap)
    assert planner.warned, 'a cached plan warns what a computed one warns'
    assert len([n for n in os.listdir(cache_root / 'plans') if n.endswith('.npy')]) == 1


@pytest.mark.parametrize('change', ['seed', 'weights', 'epoch', 'start', 'node', 'world'])
def test_every_input_changes_the_key(change, tmp_path):
    world = World(world_size=2, local_world_size=1)
    planner = CountingPlanner(seed=1, log='x')
    args = dict(planner=planner, world=world, epoch=0, sample_in_epoch=0, node=0)
    base = plan_cache.plan_key(**args)
    if change == 'seed':
        args['planner'] = CountingPlanner(seed=2, log='x')
    elif change == 'weights':
        args['planner'] = CountingPlanner(seed=1, log='x', weights=np.arange(4))
    elif change == 'world':
        args['world'] = World(world_size=2, local_world_size=1, workers_per_rank=2)
    else:
        args[{'epoch': 'epoch', 'start': 'sample_in_epoch', 'node': 'node'}[change]] = 1
    assert plan_cache.plan_key(**args) != base


@pytest.mark.parametrize('damage', ['truncated', 'empty', 'one value changed', 'a byte flipped',
                                    "another key's plan, same shape", "another key's plan, another shape"])
def test_a_damaged_plan_file_is_computed_again(cache_root, tmp_path, damage):
    """A plan file is trusted only with its checksum (a valid ``.npy`` with another value gave a wrong epoch; an empty
    file a bare ``EOFError``); the checksum is verified once per file version, as for a binary index."""
    world = World()
    planner = CountingPlanner(seed=3, log=str(tmp_path / 'log'))
    expected = np.array(plan_cache.node_plan(planner, world, 0, 0, 0))
    path = cache_root / 'plans' / f'{plan_cache.plan_key(planner, world, 0, 0, 0)}.npy'
    data = path.read_bytes()
    if damage == 'truncated':
        path.write_bytes(data[:40])  # header cut
    elif damage == 'empty':
        path.write_bytes(b'')
    elif damage == 'one value changed':
        changed = expected.copy()
        changed.reshape(-1)[1] = changed.reshape(-1)[0]
        np.save(str(path), changed)  # a valid .npy of the right shape
    elif damage.startswith("another key's plan"):  # a whole valid plan file, copied over this key's name
        other_world = world if damage.endswith('same shape') else World(world_size=2, local_world_size=2)
        other = CountingPlanner(seed=4, log=str(tmp_path / 'other-log'))
        assert not np.array_equal(plan_cache.node_plan(other, other_world, 0, 0, 0), expected)
        path.write_bytes((cache_root / 'plans' / f'{plan_cache.plan_key(other, other_world, 0, 0, 0)}.npy')
                         .read_bytes())
    else:
        path.write_bytes(data[:-20] + bytes([data[-20] ^ 1]) + data[-19:])  # in the last value, checksum kept
    assert np.array_equal(plan_cache.node_plan(planner, world, 0, 0, 0), expected)
    assert _computations(planner.log) == 2


def test_without_sharing_nothing_is_written(cache_root, tmp_path):
    world = World()
    planner = CountingPlanner(seed=3, log=str(tmp_path / 'log'))
    plan_cache.node_plan(planner, world, 0, 0, 0, share=False)
    plan_cache.node_plan(planner, world, 0, 0, 0, share=False)
    assert _computations(planner.log) == 2 and not (cache_root / 'plans').exists()


def _plan_in_child(root, log, queue):
    os.environ['STREAMING_CORE_CACHE_DIR'] = root
    world = World(world_size=2, local_world_size=2)
    plan = plan_cache.node_plan(CountingPlanner(seed=5, log=log, delay=0.5), world, 1, 0, 0)
    queue.put(np.array(plan).tolist())


@pytest.mark.parametrize('method', ['fork', 'spawn'])
def test_processes_of_a_node_compute_a_plan_once(tmp_path, method):
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    log = str(tmp_path / 'log')
    children = [ctx.Process(target=_plan_in_child, args=(str(tmp_path / 'cache'), log, queue)) for _ in range(3)]
    for child in children:
        child.start()
    plans = [queue.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert plans[0] == plans[1] == plans[2]
    assert _computations(log) == 1


def test_a_plan_checksum_is_verified_once_per_file_version(cache_root, tmp_path, monkeypatch):
    """Loading a plan marks its use (its times change), which must not void its verification record: every process
    of every epoch would read the whole plan again."""
    from streaming_core.storage import verified_files
    world = World()
    planner = CountingPlanner(seed=5, log=str(tmp_path / 'log'))
    plan_cache.node_plan(planner, world, 0, 0, 0)
    calls = []
    real = verified_files.xxh3_checksum
    monkeypatch.setattr(verified_files, 'xxh3_checksum', lambda handle, length: calls.append(length) or
                        real(handle, length))
    for _ in range(4):
        planner.warned.clear()  # (a field of the test planner: part of the plan's key)
        plan_cache.node_plan(planner, world, 0, 0, 0)
    assert len(calls) == 1 and _computations(planner.log) == 1
