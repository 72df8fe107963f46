"""The order and state-dict cases, as JSON the reference scripts and our side both read.

A case names its data (``local``: one of the datasets ``A`` (137 samples), ``B`` (61), ``C`` (23) of
``compat/ref/make_order_data.py``, or ``streams``: a list of ``{'local': name, weight...}``) and the
``StreamingDataset`` keyword arguments (``kwargs``), identical on both sides.
"""

from __future__ import annotations

from typing import Any

__all__ = ['ITER_CASES', 'PLAN_CASES', 'STATE_CASES', 'SHUFFLE_ALGOS', 'BATCHING_METHODS', 'LAYOUT', 'sample_ids']

#: The order datasets: name -> (first id, sample count, size_limit, seed) (see compat/ref/make_order_data.py).
LAYOUT = {'A': (0, 137, 1000, 1), 'B': (1000, 61, 700, 2), 'C': (2000, 23, 500, 3)}

SHUFFLE_ALGOS = ['naive', 'py1e', 'py1br', 'py1s', 'py2s']
BATCHING_METHODS = ['random', 'stratified', 'per_stream', 'device_per_stream']
ABC = [{'local': 'A'}, {'local': 'B'}, {'local': 'C'}]


def sample_ids(case: dict[str, Any]) -> list[int]:
    """The ``id`` column of each global sample index of a case's dataset (streams concatenated in order)."""
    names = [s['local'] for s in case['streams']] if case.get('streams') else [case['local']]
    out: list[int] = []
    for name in names:
        first, count = LAYOUT[name][:2]
        out.extend(range(first, first + count))
    return out


def _streams(**weights: list[Any]) -> list[dict[str, Any]]:
    """ABC streams with one weight kind per stream (``None`` leaves a stream unweighted)."""
    out = [dict(s) for s in ABC]
    for kind, values in weights.items():
        for spec, value in zip(out, values, strict=True):
            if value is not None:
                spec[kind] = value
    return out


def _iter_cases() -> list[dict[str, Any]]:
    cases = [
        {'id': 'seq-b1', 'local': 'A', 'kwargs': {'batch_size': 1}, 'epochs': 2},
        {'id': 'seq-ncn3-b4', 'local': 'A', 'kwargs': {'batch_size': 4, 'num_canonical_nodes': 3}},
        {'id': 'seq-ncn8-b5-orig', 'local': 'A',
         'kwargs': {'batch_size': 5, 'num_canonical_nodes': 8, 'partition_algo': 'orig'}},
    ]
    for algo in SHUFFLE_ALGOS:
        cases += [
            {'id': f'{algo}-defaults', 'local': 'A', 'epochs': 2,
             'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': algo}},
            {'id': f'{algo}-ncn4-seed123-block20', 'local': 'A', 'epochs': 2,
             'kwargs': {'batch_size': 3, 'shuffle': True, 'shuffle_algo': algo, 'shuffle_seed': 123,
                        'num_canonical_nodes': 4, 'shuffle_block_size': 20}},
            {'id': f'{algo}-ncn2-orig-b7-seed0', 'local': 'A',
             'kwargs': {'batch_size': 7, 'shuffle': True, 'shuffle_algo': algo, 'shuffle_seed': 0,
                        'num_canonical_nodes': 2, 'partition_algo': 'orig', 'shuffle_block_size': 50}},
            {'id': f'{algo}-streams-ncn3', 'streams': ABC, 'epochs': 2,
             'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': algo, 'num_canonical_nodes': 3,
                        'shuffle_block_size': 30}},
        ]
    cases += [
        {'id': 'epoch-size-100', 'local': 'A', 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2, 'epoch_size': 100}},
        {'id': 'epoch-size-300', 'local': 'A',
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2, 'epoch_size': 300}},
        {'id': 'epoch-size-abbrev', 'local': 'A',
         'kwargs': {'batch_size': 2, 'shuffle': True, 'shuffle_algo': 'py1s', 'epoch_size': '0.25k'}},
        {'id': 'streams-unweighted-noshuffle', 'streams': ABC, 'kwargs': {'batch_size': 4}},
        {'id': 'streams-unweighted-epoch-size', 'streams': ABC, 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'epoch_size': 150}},
        {'id': 'streams-proportion-epoch-size', 'streams': _streams(proportion=[0.5, 0.3, 0.2]), 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': 'py1s', 'num_canonical_nodes': 4,
                    'epoch_size': 150}},
        {'id': 'streams-proportion', 'streams': _streams(proportion=[2, 1, 1]),
         'kwargs': {'batch_size': 3, 'shuffle': True, 'num_canonical_nodes': 2}},
        {'id': 'streams-repeat', 'streams': _streams(repeat=[1, 2.5, 0.5]), 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': 'py1br', 'num_canonical_nodes': 2,
                    'shuffle_block_size': 25}},
        {'id': 'streams-choose', 'streams': _streams(choose=[50, 70, 30]), 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2}},
        {'id': 'streams-mixed-absolute', 'streams': [{'local': 'A', 'repeat': 0.5}, {'local': 'B', 'choose': 20},
                                                     {'local': 'C'}],
         'kwargs': {'batch_size': 2, 'shuffle': True, 'shuffle_algo': 'py2s', 'num_canonical_nodes': 2}},
        {'id': 'sampling-fixed', 'streams': _streams(repeat=[1, 2.5, 0.5]), 'epochs': 3,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2, 'sampling_method': 'fixed'}},
        {'id': 'sampling-balanced-noshuffle', 'streams': _streams(choose=[50, 70, 30]), 'epochs': 2,
         'kwargs': {'batch_size': 4, 'sampling_method': 'balanced'}},
        {'id': 'sampling-granularity-3', 'streams': _streams(choose=[60, 40, 10]), 'epochs': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2, 'sampling_granularity': 3}},
    ]
    for method in BATCHING_METHODS[1:]:
        cases += [
            {'id': f'batching-{method}-shuffle', 'streams': ABC, 'epochs': 2,
             'kwargs': {'batch_size': 8, 'shuffle': True, 'num_canonical_nodes': 2, 'batching_method': method}},
            {'id': f'batching-{method}-noshuffle', 'streams': _streams(proportion=[0.5, 0.3, 0.2]),
             'kwargs': {'batch_size': 5, 'batching_method': method, 'epoch_size': 120}},
        ]
    for case in cases:
        case['mode'] = 'iter'
    return cases


WORLDS = [(1, 1, 1), (1, 2, 2), (2, 2, 1), (2, 4, 3), (4, 2, 2), (3, 1, 2)]


def _plan_cases() -> list[dict[str, Any]]:
    cases = []
    for nodes, ranks, workers in WORLDS:
        world = [nodes, ranks, workers]
        tag = f'{nodes}x{ranks}x{workers}'
        gbs = nodes * ranks * 3
        at = [[0, 0], [1, 0], [0, 2 * gbs], [0, 37]]
        cases.append({'id': f'plan-{tag}-noshuffle', 'local': 'A', 'world': world, 'at': at,
                      'kwargs': {'batch_size': 3, 'num_canonical_nodes': 2 * nodes}})
        for algo in SHUFFLE_ALGOS:
            cases.append({'id': f'plan-{tag}-{algo}', 'local': 'A', 'world': world, 'at': at,
                          'kwargs': {'batch_size': 3, 'shuffle': True, 'shuffle_algo': algo,
                                     'num_canonical_nodes': 2 * nodes, 'shuffle_block_size': 16}})
        batch = 2 if nodes * ranks >= 4 else 12 // (nodes * ranks)  # stratified: every stream in each batch
        for method in BATCHING_METHODS:
            cases.append({'id': f'plan-{tag}-{method}', 'streams': ABC, 'world': world,
                          'at': [[0, 0], [2, 0], [0, 3 * nodes * ranks * batch]],
                          'kwargs': {'batch_size': batch, 'shuffle': True, 'num_canonical_nodes': 2 * nodes,
                                     'batching_method': method}})
    cases += [
        {'id': 'plan-default-ncn-py1e', 'local': 'A', 'world': [2, 2, 1], 'at': [[0, 0], [1, 0]],
         'kwargs': {'batch_size': 4, 'shuffle': True}},
        {'id': 'plan-default-ncn-py2s', 'local': 'A', 'world': [2, 2, 1], 'at': [[0, 0], [1, 8]],
         'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': 'py2s'}},
        {'id': 'plan-default-ncn-naive', 'local': 'A', 'world': [4, 2, 2], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'shuffle': True, 'shuffle_algo': 'naive'}},
        {'id': 'plan-pn-over-ncn-orig', 'local': 'A', 'world': [4, 2, 2], 'at': [[0, 0], [0, 16]],
         'kwargs': {'batch_size': 2, 'shuffle': True, 'num_canonical_nodes': 2, 'partition_algo': 'orig'}},
        {'id': 'plan-pn-over-ncn-relaxed', 'local': 'A', 'world': [4, 2, 2], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'shuffle': True, 'num_canonical_nodes': 2, 'partition_algo': 'relaxed'}},
        {'id': 'plan-incompatible-ncn-orig', 'local': 'A', 'world': [3, 1, 1], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'num_canonical_nodes': 2, 'partition_algo': 'orig'}},
        {'id': 'plan-ncn-1-big-world', 'local': 'C', 'world': [2, 8, 2], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'shuffle': True, 'num_canonical_nodes': 1}},
        {'id': 'plan-proportion-epoch-size', 'streams': _streams(proportion=[0.5, 0.3, 0.2]), 'world': [2, 2, 2],
         'at': [[0, 0], [1, 0]], 'kwargs': {'batch_size': 3, 'shuffle': True, 'shuffle_algo': 'py1s',
                                            'num_canonical_nodes': 4, 'epoch_size': 200}},
        {'id': 'plan-repeat-fixed', 'streams': _streams(repeat=[1, 2.5, 0.5]), 'world': [2, 2, 2],
         'at': [[0, 0], [1, 0]], 'kwargs': {'batch_size': 3, 'shuffle': True, 'num_canonical_nodes': 2,
                                            'sampling_method': 'fixed'}},
        {'id': 'plan-choose-granularity', 'streams': _streams(choose=[60, 40, 10]), 'world': [2, 2, 2],
         'at': [[0, 0], [3, 0]], 'kwargs': {'batch_size': 3, 'shuffle': True, 'num_canonical_nodes': 2,
                                            'sampling_granularity': 4}},
        {'id': 'plan-stratified-proportion', 'streams': _streams(proportion=[0.5, 0.3, 0.2]), 'world': [2, 2, 1],
         'at': [[0, 0], [0, 24]], 'kwargs': {'batch_size': 6, 'shuffle': True, 'num_canonical_nodes': 2,
                                             'batching_method': 'stratified', 'epoch_size': 180}},
        {'id': 'plan-stratified-batch-too-small', 'streams': ABC, 'world': [1, 1, 1], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'num_canonical_nodes': 1, 'batching_method': 'stratified'}},
        {'id': 'plan-device-per-stream-ncn-mismatch', 'streams': ABC, 'world': [2, 1, 1], 'at': [[0, 0]],
         'kwargs': {'batch_size': 2, 'num_canonical_nodes': 3, 'batching_method': 'device_per_stream'}},
    ]
    for case in cases:
        case['mode'] = 'plan'
    return cases


def _state_cases() -> list[dict[str, Any]]:
    return [
        {'id': 'state-py1e', 'local': 'A', 'batches': 5,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2}},
        {'id': 'state-noshuffle', 'local': 'A', 'batches': 7, 'kwargs': {'batch_size': 3}},
        {'id': 'state-second-epoch', 'local': 'A', 'full_epochs': 1, 'batches': 4,
         'kwargs': {'batch_size': 5, 'shuffle': True, 'shuffle_algo': 'py1s', 'num_canonical_nodes': 3}},
        {'id': 'state-streams-proportion', 'streams': _streams(proportion=[0.5, 0.3, 0.2]), 'batches': 6,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': 'py1br', 'num_canonical_nodes': 2,
                    'epoch_size': 120, 'shuffle_block_size': 40}},
        {'id': 'state-default-ncn', 'local': 'A', 'batches': 3, 'kwargs': {'batch_size': 8, 'shuffle': True}},
        {'id': 'state-stratified', 'streams': ABC, 'batches': 3,
         'kwargs': {'batch_size': 10, 'shuffle': True, 'num_canonical_nodes': 1, 'batching_method': 'stratified'}},
        {'id': 'state-per-stream', 'streams': ABC, 'batches': 5,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2, 'batching_method': 'per_stream'}},
        {'id': 'state-before-iteration', 'local': 'B', 'batches': 0,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'shuffle_algo': 'naive', 'num_canonical_nodes': 1}},
        {'id': 'state-workers-2', 'local': 'A', 'batches': 5, 'num_workers': 2,
         'kwargs': {'batch_size': 4, 'shuffle': True, 'num_canonical_nodes': 2}},
        {'id': 'state-workers-3-streams', 'streams': _streams(proportion=[0.5, 0.3, 0.2]), 'batches': 4,
         'num_workers': 3, 'full_epochs': 1,
         'kwargs': {'batch_size': 3, 'shuffle': True, 'shuffle_algo': 'py1s', 'num_canonical_nodes': 2,
                    'epoch_size': 90}},
        {'id': 'state-seed-py2s', 'local': 'A', 'batches': 9,
         'kwargs': {'batch_size': 2, 'shuffle': True, 'shuffle_algo': 'py2s', 'shuffle_seed': 42,
                    'num_canonical_nodes': 4}},
    ]


ITER_CASES = _iter_cases()
PLAN_CASES = _plan_cases()
STATE_CASES = _state_cases()
