"""Elastic determinism with real processes: every world shape yields the same sequence of global batches."""

from __future__ import annotations

import pytest

from tests.fixtures.data import write_mds
from tests.multiproc import global_batches, run_world

GLOBAL_BATCH = 12
SHAPES = [(1, 1, 1), (1, 2, 2), (2, 2, 1), (2, 2, 2), (4, 1, 2), (1, 3, 1)]


@pytest.fixture(scope='module')
def remote(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('elastic') / 'remote')
    write_mds(path, 240, size_limit=1 << 9)
    return path


def _config(remote, local, ranks, workers, **extra):
    dataset = dict(remote=remote, local=local, batch_size=GLOBAL_BATCH // ranks, shuffle=True, shuffle_algo='py1e',
                   shuffle_block_size=40, num_canonical_nodes=4, shuffle_seed=11)
    dataset.update(extra)
    return {'dataset': dataset, 'workers': workers, 'epochs': 2}


@pytest.mark.slow
def test_global_order_is_the_same_for_every_world_shape(remote, tmp_path):
    orders = {}
    for nodes, per_node, workers in SHAPES:
        directory = tmp_path / f'{nodes}x{per_node}x{workers}'
        directory.mkdir()
        results = run_world(str(directory), nodes, per_node,
                            _config(remote, str(directory / 'local'), nodes * per_node, workers))
        steps = {len(r['epochs'][0]) for r in results}
        assert len(steps) == 1, f'ranks took different numbers of steps: {steps}'
        orders[(nodes, per_node, workers)] = [
            [sorted(batch) for batch in global_batches(results, epoch)] for epoch in (0, 1)]
    baseline = orders[SHAPES[0]]
    assert sorted(i for batch in baseline[0] for i in batch) == list(range(240))
    assert baseline[0] != baseline[1]
    for shape, order in orders.items():
        assert order == baseline, f'world {shape} differs from {SHAPES[0]}'


@pytest.mark.slow
@pytest.mark.parametrize('before, after', [((2, 2, 2), (1, 2, 1)), ((1, 3, 1), (4, 1, 2))])
def test_resume_on_a_different_world(remote, tmp_path, before, after):
    stop = 7
    baseline_dir = tmp_path / 'baseline'
    baseline_dir.mkdir()
    baseline = run_world(str(baseline_dir), 1, 1, dict(_config(remote, str(baseline_dir / 'local'), 1, 0),
                                                        epochs=1))
    expected = [sorted(batch) for batch in global_batches(baseline)]

    first_dir = tmp_path / 'first'
    first_dir.mkdir()
    nodes, per_node, workers = before
    config = dict(_config(remote, str(first_dir / 'local'), nodes * per_node, workers), epochs=1,
                  streaming_loader=True, stop_after=stop)
    first = run_world(str(first_dir), nodes, per_node, config)
    states = {json_key(r['state']) for r in first}
    assert len(states) == 1, 'every rank must report the same state'
    state = first[0]['state']
    assert state['sample_in_epoch'] == stop * GLOBAL_BATCH

    second_dir = tmp_path / 'second'
    second_dir.mkdir()
    nodes, per_node, workers = after
    config = dict(_config(remote, str(second_dir / 'local'), nodes * per_node, workers), epochs=1,
                  streaming_loader=True, resume=state)
    second = run_world(str(second_dir), nodes, per_node, config)
    resumed = [sorted(batch) for batch in global_batches(first)[:stop] + global_batches(second)]
    assert resumed == expected


def json_key(state):
    import json
    return json.dumps(state, sort_keys=True)
