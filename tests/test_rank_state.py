"""Per-rank state: never shared between ranks started by spawn or fork, always shared with DataLoader workers; the
node layout learnt from the process group when the launcher does not set LOCAL_WORLD_SIZE."""

from __future__ import annotations

import copy
import os
import pickle
import sys

import pytest
import torch.distributed as dist
import torch.multiprocessing as tmp_mp

from streaming_core import StreamingDataLoader, StreamingDataset, World
from streaming_core.reading.shared_state import SharedState
from tests.fixtures.data import ids_of, write_mds
from tests.multiproc import free_port


def _dataset(path: str, **kwargs) -> StreamingDataset:
    args = dict(local=path, batch_size=4, shuffle=True, num_canonical_nodes=2, shuffle_block_size=30)
    args.update(kwargs)
    return StreamingDataset(**args)


def test_plain_pickling_copies_the_contents_privately():
    state = SharedState()
    state.write_resume({'epoch': 3, 'sample_in_epoch': 7})
    state.begin_epoch(0, 2, 5)
    twin = pickle.loads(pickle.dumps(state))
    deep = copy.deepcopy(state)
    for other in (twin, deep):
        assert other.read_resume() == {'epoch': 3, 'sample_in_epoch': 7}
        assert other.current() == (2, 5)
        other.begin_epoch(0, 9, 0)
    assert state.current() == (2, 5)  # the copies are private


def _forked_rank(state: SharedState, queue) -> None:
    state.begin_epoch(0, 5, 0)  # a rank started by fork (ddp_fork / ddp_notebook) advances its own counter
    queue.put(state.current())


def test_a_rank_started_by_fork_takes_a_private_copy():
    import multiprocessing
    state = SharedState()
    state.begin_epoch(0, 1, 0)
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    proc = ctx.Process(target=_forked_rank, args=(state, queue))
    proc.start()
    assert queue.get(timeout=60) == (5, 0)
    proc.join(60)
    assert proc.exitcode == 0
    assert state.current() == (1, 0)  # the parent's counter did not move


def _spawned_rank(rank: int, path: str, port: int, out: str, dataset: StreamingDataset) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    try:
        loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
        epochs = [ids_of(loader) for _ in range(2)]
        with open(f'{out}.{rank}', 'w') as handle:
            handle.write(repr(epochs))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize('method', ['spawn', 'fork', 'forkserver'])
def test_ranks_started_with_the_dataset_in_their_arguments_keep_their_own_epochs(tmp_path, method):
    """Lightning's ddp_spawn pickles the dataset into every rank (ddp_fork inherits it): each rank must read its
    own epochs 0 and 1, exactly as separate torchrun processes would."""
    path = write_mds(str(tmp_path / 'ds'), 96)
    dataset = _dataset(path)
    out = str(tmp_path / 'out')
    tmp_mp.start_processes(_spawned_rank, args=(path, free_port(), out, dataset), nprocs=2, join=True,
                           start_method=method)
    got = [eval(open(f'{out}.{rank}').read()) for rank in range(2)]
    for rank in range(2):
        expected = []
        reference = _dataset(path)
        for epoch in range(2):
            plan = reference.get_plan(World(rank=0, world_size=2, local_world_size=2, workers_per_rank=2), epoch)
            expected.append(_interleaved(plan[0, rank]))
        assert got[rank] == expected, f'rank {rank}'
    everything = sorted(got[0][0] + got[1][0])
    assert everything == list(range(96))


def _interleaved(rank_plan) -> list[int]:
    """A rank's samples as the DataLoader yields them: worker batches round robin."""
    workers, batches = rank_plan.shape[0], rank_plan.shape[1]
    out = []
    for b in range(batches):
        for w in range(workers):
            out.extend(int(i) for i in rank_plan[w, b] if i >= 0)
    return out


def _layout_rank(rank: int, path: str, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    os.environ.pop('LOCAL_WORLD_SIZE', None)
    dist.init_process_group('gloo', rank=rank, world_size=2)
    try:
        dataset = StreamingDataset(local=path, batch_size=4, shuffle=True)  # default num_canonical_nodes
        loader = StreamingDataLoader(dataset, batch_size=4, num_workers=1)
        with open(f'{out}.{rank}', 'w') as handle:
            handle.write(repr([ids_of(loader), dataset.world.local_world_size,
                               loader.state_dict()['num_canonical_nodes']]))
    finally:
        dist.destroy_process_group()


def test_the_node_layout_comes_from_the_process_group_without_local_world_size(tmp_path):
    """Launchers that do not set LOCAL_WORLD_SIZE (Lightning, mp.spawn) get the order torchrun gives."""
    path = write_mds(str(tmp_path / 'ds'), 200)
    out = str(tmp_path / 'out')
    tmp_mp.start_processes(_layout_rank, args=(path, free_port(), out), nprocs=2, join=True, start_method='spawn')
    got = [eval(open(f'{out}.{rank}').read()) for rank in range(2)]
    assert [g[1] for g in got] == [2, 2]  # one node of two ranks, as torchrun's LOCAL_WORLD_SIZE=2 says
    torchrun = StreamingDataset(local=path, batch_size=4, shuffle=True,
                                world=World(rank=0, world_size=2, local_world_size=2))
    plan = torchrun.get_plan(World(rank=0, world_size=2, local_world_size=2, workers_per_rank=1))
    assert [g[2] for g in got] == [torchrun.num_canonical_nodes] * 2
    for rank in range(2):
        assert got[rank][0] == _interleaved(plan[0, rank])


def _alone_rank(rank: int, path: str, port: int, out: str) -> None:
    import multiprocessing
    import time

    from streaming_core.ordering import world as world_module
    world_module.LAYOUT_TIMEOUT = 60.0
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    os.environ.pop('LOCAL_WORLD_SIZE', None)
    dataset = StreamingDataset(local=path, batch_size=4, shuffle=True)  # built before the group (Lightning __init__)
    dist.init_process_group('gloo', rank=rank, world_size=2)
    try:
        loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2)
        started = time.monotonic()
        alone = None
        if rank == 0:  # rank 0 alone: logs len() in setup, starts a helper process (a callback's uploader)
            helper = multiprocessing.get_context('fork').Process(target=time.sleep, args=(0,))
            helper.start()
            helper.join()
            alone = len(dataset)
        elapsed = time.monotonic() - started
        dist.barrier()  # where rank 1 waited all along
        with open(f'{out}.{rank}', 'w') as handle:
            handle.write(repr([alone, elapsed, ids_of(loader), dataset.world.local_world_size]))
    finally:
        dist.destroy_process_group()


def test_one_rank_alone_asking_for_len_or_forking_does_not_wait_for_the_others(tmp_path):
    """Without LOCAL_WORLD_SIZE (Lightning) the node layout needs every rank's registration. len(dataset) and a fork
    on rank 0 alone, while rank 1 waits in a barrier, each waited for it: 300 s, then a NodeLayoutError (len) or a
    silent stall (the fork). They need no layout and do not wait; DataLoader workers still get it. (Reading or a
    state on one rank alone does need it: the order depends on the nodes.)"""
    path = write_mds(str(tmp_path / 'ds'), 200)
    out = str(tmp_path / 'out')
    tmp_mp.start_processes(_alone_rank, args=(path, free_port(), out), nprocs=2, join=True, start_method='spawn')
    got = [eval(open(f'{out}.{rank}').read()) for rank in range(2)]
    assert got[0][0] == 100 and got[0][1] < 20, got[0][:2]
    assert sorted(got[0][2] + got[1][2]) == list(range(200))
    assert [g[3] for g in got] == [2, 2]


def _regrouped_rank(rank: int, path: str, ports: list[int], out: str) -> None:
    from streaming_core.ordering import world as world_module
    world_module.LAYOUT_TIMEOUT = 30.0  # a missed registration fails in seconds, not minutes
    os.environ.update(MASTER_ADDR='127.0.0.1')
    os.environ.pop('LOCAL_WORLD_SIZE', None)
    layouts = []
    for port in ports:
        os.environ['MASTER_PORT'] = str(port)
        dist.init_process_group('gloo', rank=rank, world_size=2)
        try:
            if rank == 0:  # what a new store at a reused address (same id) looked like to the old per-process record
                store = dist.distributed_c10d._get_default_store()
                world_module._registered[(id(store), 2)] = object()
                world_module._layouts[(id(store), 2)] = (object(), 1)
            dataset = StreamingDataset(local=path, batch_size=4)
            layouts.append(dataset.world.local_world_size)
        finally:
            dist.destroy_process_group()
    with open(f'{out}.{rank}', 'w') as handle:
        handle.write(repr(layouts))


def test_a_new_process_group_learns_the_layout_again(tmp_path):
    """Destroying the process group and creating another (a second fit, a re-launch in one process) registers the
    rank in the new group's store: a record about an earlier store never makes a rank skip it (the other ranks
    would wait for it until the layout timeout)."""
    path = write_mds(str(tmp_path / 'ds'), 40)
    out = str(tmp_path / 'out')
    tmp_mp.start_processes(_regrouped_rank, args=(path, [free_port(), free_port()], out), nprocs=2, join=True,
                           start_method='spawn')
    assert [eval(open(f'{out}.{rank}').read()) for rank in range(2)] == [[2, 2], [2, 2]]


@pytest.mark.skipif(sys.platform != 'linux', reason='memfd')
def test_dataloader_workers_share_the_rank_state(tmp_path):
    """Workers (fork and spawn) see the rank's set_epoch and load_state_dict and advance its epoch."""
    path = write_mds(str(tmp_path / 'ds'), 64)
    for method in ('fork', 'spawn'):
        dataset = _dataset(path)
        loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=method)
        first = ids_of(loader)
        assert dataset.next_epoch == 1
        loader.set_epoch(0)
        assert ids_of(loader) == first
        assert dataset.state_dict(64, True)['epoch'] == 1
