"""Iteration through torch DataLoaders: workers, persistent workers, back-to-back epochs."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time

import pytest
from torch.utils.data import DataLoader

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.errors import RemoteNotFoundError, WorkerDiedError
from tests.fixtures.data import ids_of


def _flat(loader):
    return [i for batch in loader for i in batch['id'].tolist()]


@pytest.mark.parametrize('workers', [1, 2, 3])
def test_order_is_independent_of_worker_count(mds_dir, workers):
    path = mds_dir(150)
    args = dict(local=path, batch_size=5, shuffle=True, num_canonical_nodes=1, shuffle_block_size=50)
    reference = _flat(DataLoader(StreamingDataset(**args), batch_size=5, num_workers=0))
    assert sorted(reference) == list(range(150))
    assert _flat(DataLoader(StreamingDataset(**args), batch_size=5, num_workers=workers)) == reference


@pytest.mark.parametrize('persistent', [False, True])
def test_epochs_back_to_back(mds_dir, persistent):
    path = mds_dir(90)
    args = dict(local=path, batch_size=3, shuffle=True, num_canonical_nodes=1, shuffle_block_size=30)
    expected_dataset = StreamingDataset(**args)
    expected = [ids_of(expected_dataset) for _ in range(3)]
    loader = DataLoader(StreamingDataset(**args), batch_size=3, num_workers=2, persistent_workers=persistent)
    epochs = [_flat(loader) for _ in range(3)]
    assert epochs == expected
    assert len({tuple(e) for e in epochs}) == 3


def test_streaming_dataloader_counts_samples(mds_dir):
    loader = StreamingDataLoader(StreamingDataset(local=mds_dir(30), batch_size=4), batch_size=4, num_workers=0)
    total = sum(len(batch['id']) for batch in loader)
    assert total == 30 and loader.num_samples_yielded == 30


@pytest.mark.parametrize('workers', [0, 2])
def test_a_state_after_an_epoch_that_drops_its_tail_resumes_at_the_next_epoch(mds_dir, workers):
    """``drop_last=True`` with an epoch that is not a multiple of the batch size: the state after the last batch is
    the next epoch's start (it counted only the yielded samples, so a resumed loop spent an epoch with no batch and
    every later epoch ran one turn late)."""
    path = mds_dir(10)

    def make():
        return StreamingDataLoader(StreamingDataset(local=path, batch_size=4, shuffle=True), batch_size=4,
                                   num_workers=workers, drop_last=True)
    loader = make()
    epochs = [[b['id'].tolist() for b in loader] for _ in range(3)]
    assert [len(e) for e in epochs] == [2, 2, 2]
    loader = make()
    assert [b['id'].tolist() for b in loader] == epochs[0]
    state = loader.state_dict()
    assert (state['epoch'], state['sample_in_epoch']) == (1, 0)
    resumed = make()
    resumed.load_state_dict(state)
    assert [[b['id'].tolist() for b in resumed] for _ in range(2)] == epochs[1:]
    stopped = make()
    for _ in stopped:
        break  # a loop left early is not over
    assert stopped.state_dict()['epoch'] == 0
    loader.load_state_dict(stopped.state_dict())  # a loader that ran out, given a mid-epoch state, reports it
    assert (loader.state_dict()['epoch'], loader.state_dict()['sample_in_epoch']) == (0, 4)


def test_nothing_left_in_dev_shm(mds_dir):
    before = _shm_names()
    loader = DataLoader(StreamingDataset(local=mds_dir(40), batch_size=4), batch_size=4, num_workers=2)
    assert sorted(_flat(loader)) == list(range(40))
    del loader
    assert _shm_names() - before == set()


def _shm_names():
    """Names in /dev/shm that a streaming library would create (ours creates none; the reference's are NNNNNN_*)."""
    names = set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()
    return {n for n in names if 'streaming' in n or re.match(r'^\d{6}_', n)}


def test_inherited_shard_state_does_not_force_the_slow_path(mds_dir, monkeypatch):
    """In a forked worker the manager's per-process state is replaced; the loop must read the new views, not the
    parent's (otherwise every sample would go through the slow path)."""
    from streaming_core.reading.iteration import EpochIterator
    dataset = StreamingDataset(local=mds_dir(200), batch_size=4)
    dataset._shards_manager._pid = -1  # as a forked child sees it: state that belongs to another process
    calls = []
    original = EpochIterator._wait_for

    def counting(self, shard, pos):
        calls.append(shard)
        return original(self, shard, pos)

    monkeypatch.setattr(EpochIterator, '_wait_for', counting)
    assert ids_of(dataset) == list(range(200))
    assert len(calls) <= dataset.num_shards


def _killed_process() -> multiprocessing.Process:
    process = multiprocessing.get_context('fork').Process(target=time.sleep, args=(60,))
    process.start()
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    return process


def _loader_failing_with(path: str, error: BaseException, workers: list) -> StreamingDataLoader:
    """A loader whose torch iterator has ``workers`` and raises ``error`` (what torch's raises when it fails)."""
    class _Iterator:
        _workers = workers

        def __next__(self):
            raise error

    class _Loader(StreamingDataLoader):
        def _get_iterator(self):
            return _Iterator()

    return _Loader(StreamingDataset(local=path, batch_size=4), batch_size=4)


def test_a_killed_worker_is_named_instead_of_a_bare_connection_reset(mds_dir):
    """torch reports a worker killed while the main process fetched a tensor it shared as "Connection reset"."""
    process = _killed_process()
    loader = _loader_failing_with(mds_dir(20), ConnectionResetError(104, 'Connection reset by peer'), [process])
    with pytest.raises(WorkerDiedError, match=rf'worker \(pid {process.pid}\) killed by SIGKILL') as caught:
        next(iter(loader))
    assert isinstance(caught.value.__cause__, ConnectionResetError)


def test_a_connection_error_with_every_worker_alive_is_not_rewritten(mds_dir):
    loader = _loader_failing_with(mds_dir(20), ConnectionResetError(104, 'Connection reset by peer'), [])
    with pytest.raises(ConnectionResetError):
        next(iter(loader))


def test_our_own_errors_from_a_worker_pass_through(mds_dir):
    """A storage error re-raised from a worker is the user's answer, even while a worker has failed."""
    error = RemoteNotFoundError('s3://bucket/ds/shard.00005.mds does not exist')
    loader = _loader_failing_with(mds_dir(20), error, [_killed_process()])
    with pytest.raises(RemoteNotFoundError, match='shard.00005.mds'):
        next(iter(loader))


def test_a_loop_left_with_break_is_resumed_by_loading_its_state(mds_dir):
    """As docs/guide/resumption.md says: after ``break``, iterating the same loader again starts the next epoch (as
    in the reference); loading the loader's own state first finishes the interrupted epoch exactly."""
    path = mds_dir(40)

    def make():
        return StreamingDataLoader(StreamingDataset(local=path, batch_size=4, shuffle=True), batch_size=4)
    uninterrupted = make()
    epochs = [[b['id'].tolist() for b in uninterrupted] for _ in range(2)]
    loader = make()
    head = []
    for batch in loader:
        head.append(batch['id'].tolist())
        if len(head) == 3:
            break
    state = loader.state_dict()
    assert (state['epoch'], state['sample_in_epoch']) == (0, 12)
    loader.load_state_dict(state)
    assert head + [b['id'].tolist() for b in loader] == epochs[0]
    again = make()
    for _ in again:
        break
    assert [b['id'].tolist() for b in again] == epochs[1]  # the rest of epoch 0 is dropped
