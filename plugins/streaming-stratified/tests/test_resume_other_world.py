"""``per_stream`` and ``device_per_stream`` cut each stream per rank: a state saved on one number of ranks is refused
on another (it lost and repeated samples: 12 lost, 15 repeated in a review's 1 -> 3 ranks case), with a message
that says what to do; on the same world it resumes exactly; ``random`` and ``stratified`` still resume on any
number of ranks with the same global batch."""

from __future__ import annotations

import collections

import pytest

from streaming_core import Stream, StreamingDataLoader, StreamingDataset, World
from tests.fixtures.data import write_mds

GLOBAL_BATCH = 12


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    root = tmp_path_factory.mktemp('streams')
    return [write_mds(str(root / name), count, start=start, size_limit=400)
            for name, start, count in (('a', 0, 300), ('b', 1000, 137), ('c', 2000, 59))]


def _loader(roots, method, rank, ranks):
    streams = [Stream(local=path, proportion=p) for path, p in zip(roots, (0.5, 0.3, 0.2))]
    dataset = StreamingDataset(streams=streams, epoch_size=333, shuffle=True, batching_method=method,
                               batch_size=GLOBAL_BATCH // ranks, num_canonical_nodes=1,
                               world=World(rank=rank, world_size=ranks, local_world_size=ranks))
    return StreamingDataLoader(dataset, batch_size=GLOBAL_BATCH // ranks, num_workers=0)


def _epoch(roots, method, ranks, state=None, stop=None):
    ids, saved = [], None
    for rank in range(ranks):
        loader = _loader(roots, method, rank, ranks)
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
