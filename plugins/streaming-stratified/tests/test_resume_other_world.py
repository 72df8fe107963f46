"""``per_stream`` and ``device_per_stream`` cut each stream per rank: a state saved on one number of ranks is refused
on another (it lost and repeated samples: 12 lost, 15 repeated in a review's 1 -> 3 ranks case), with a message
that says what to do; on the same world it resumes exactly; ``random`` and ``stratified`` still resume on any
number of ranks with the same global batch."""

from __future__ import annotations

import collections

import pytest

from streaming_core import Stream, StreamingDataLoader, StreamingDataset, World
from tests.fixtures.data import ids_of, write_mds

GLOBAL_BATCH = 12


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    root = tmp_path_factory.mktemp('streams')
    return [write_mds(str(root / name), count, start=start, size_limit=400)
            for name, start, count in (('a', 0, 300), ('b', 1000, 137), ('c', 2000, 59))]


def _loader(roots, method, rank, ranks, workers=0):
    streams = [Stream(local=path, proportion=p) for path, p in zip(roots, (0.5, 0.3, 0.2))]
    dataset = StreamingDataset(streams=streams, epoch_size=333, shuffle=True, batching_method=method,
                               batch_size=GLOBAL_BATCH // ranks, num_canonical_nodes=1,
                               world=World(rank=rank, world_size=ranks, local_world_size=ranks))
    return StreamingDataLoader(dataset, batch_size=GLOBAL_BATCH // ranks, num_workers=workers)


def _epoch(roots, method, ranks, state=None, stop=None, workers=0):
    ids, saved = [], None
    for rank in range(ranks):
        loader = _loader(roots, method, rank, ranks, workers)
        if state is not None:
            loader.load_state_dict(state)
        for step, batch in enumerate(loader):
            ids += [int(i) for i in batch['id']]
            if stop is not None and step + 1 == stop:
                break
        saved = loader.state_dict()
    return ids, saved


@pytest.mark.parametrize('method', ['per_stream', 'device_per_stream'])
def test_a_state_of_a_non_elastic_method_is_refused_on_another_number_of_ranks(roots, method):
    _, state = _epoch(roots, method, 1, stop=5)
    assert state['parallel_shape'] == [1, 1]
    with pytest.raises(ValueError, match=rf"1 node\(s\) of 1 data-parallel rank\(s\).*has 1 of 3.*{method}"):
        _epoch(roots, method, 3, state=state)


@pytest.mark.parametrize('method, ranks_after', [('per_stream', 1), ('device_per_stream', 1), ('random', 3),
                                                 ('stratified', 3)])
def test_resumes_that_stay_exact(roots, method, ranks_after):
    full, _ = _epoch(roots, method, 1)
    seen, state = _epoch(roots, method, 1, stop=5)
    rest, _ = _epoch(roots, method, ranks_after, state=state)
    assert collections.Counter(seen + rest) == collections.Counter(full)


def test_the_refusal_comes_from_the_loader_in_the_main_process_with_workers(roots):
    _, state = _epoch(roots, 'per_stream', 1, stop=5)
    loader = _loader(roots, 'per_stream', 0, 3, workers=1)
    loader.load_state_dict(state)
    with pytest.raises(ValueError, match=r'^This resumption state was saved by 1 node'):  # not a worker's re-raise
        next(iter(loader))


def test_a_state_saved_again_before_a_batch_keeps_the_world_that_counted_it(roots):
    """A 3-rank run that loads a 1-rank state and checkpoints before its first batch (a checkpoint at fit start, a
    preemption) saves the 1-rank shape: resuming that on 3 ranks is refused too (it lost 12 and repeated 24)."""
    _, state = _epoch(roots, 'per_stream', 1, stop=5)
    loader = _loader(roots, 'per_stream', 0, 3)
    loader.load_state_dict(state)
    again = loader.state_dict()
    assert (again['sample_in_epoch'], again['parallel_shape']) == (60, [1, 1])
    with pytest.raises(ValueError, match='saved by 1 node'):
        _epoch(roots, 'per_stream', 3, state=again)


@pytest.mark.parametrize('method', ['per_stream', 'device_per_stream'])
def test_a_state_at_an_epoch_start_resumes_on_any_world(roots, method):
    """Nothing of the epoch consumed: every world starts it from its own plan, so another number of ranks is fine."""
    _, end = _epoch(roots, method, 1)
    assert (end['epoch'], end['sample_in_epoch'], end['parallel_shape']) == (1, 0, [1, 1])
    second = [_epoch(roots, method, ranks, state=end)[0] for ranks in (1, 3)]
    assert second[0] and second[1]  # each reads its own plan of epoch 1, nothing refused
    fresh = [StreamingDataset(streams=[Stream(local=path, proportion=p) for path, p in zip(roots, (0.5, 0.3, 0.2))],
                              epoch_size=333, shuffle=True, batching_method=method, batch_size=4,
                              num_canonical_nodes=1, world=World(rank=rank, world_size=3, local_world_size=3))
             for rank in range(3)]
    for dataset in fresh:
        dataset.set_epoch(1)
    assert collections.Counter(second[1]) == collections.Counter(i for d in fresh for i in ids_of(d))
