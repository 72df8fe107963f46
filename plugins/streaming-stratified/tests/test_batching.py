"""Stream-aware batching methods (runtime.md 5.2-5.4): composition, purity, resumption, errors, compatibility."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import textwrap
import warnings

import numpy as np
import pytest

from streaming_core.machinery.lookup import get_registry
from streaming_core.ordering.planner import EpochPlanner, apply_weights
from streaming_core.ordering.world import World
from streaming_stratified.methods import batch_parts, device_per_stream, per_stream, stratified

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
METHODS = ['stratified', 'per_stream', 'device_per_stream']


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger='streaming_core')
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='Shuffle block size')
        yield


def make(stream_samples=(120, 80, 40), shard=10, weights=None, **kwargs):
    """Streams of equal shards; stream i's small IDs are [offset_i, offset_i + n_i)."""
    sizes = np.concatenate([[shard] * (n // shard) for n in stream_samples])
    shards_per_stream = [n // shard for n in stream_samples]
    k = len(stream_samples)
    weights = weights or {}
    none = [None] * k
    choose, proportion, _, size = apply_weights(weights.get('proportion', none), weights.get('repeat', none),
                                                weights.get('choose', none), list(stream_samples),
                                                weights.get('epoch_size'), 9176)
    args = dict(batch_size=2, num_canonical_nodes=2, shuffle=True, shuffle_block_size=32)
    args.update(kwargs)
    return EpochPlanner(sizes, shards_per_stream, choose, proportion, size, **args)


def stream_of(ids, stream_samples=(120, 80, 40)):
    bounds = np.cumsum(stream_samples)
    return np.searchsorted(bounds, ids, side='right')


def world(nodes=2, ranks=2, workers=2):
    return World(rank=0, world_size=nodes * ranks, local_world_size=ranks, workers_per_rank=workers)


def global_batches(plan):
    pn, ranks, _, _, batch = plan.shape
    return plan.transpose(3, 2, 0, 1, 4).reshape(-1, pn * ranks * batch)


def test_registered_by_the_plugin():
    registry = get_registry('batching')
    assert registry.get('stratified') is stratified and registry.get('per_stream') is per_stream
    assert registry.get('device_per_stream') is device_per_stream
    assert registry.origin('stratified') == 'stratified'


def test_batch_parts_largest_remainders():
    assert batch_parts(np.array([0.5, 1 / 3, 1 / 6]), 8).tolist() == [4, 3, 1]
    assert batch_parts(np.array([0.25, 0.25, 0.5]), 8).tolist() == [2, 2, 4]
    with pytest.raises(ValueError, match='Number of samples for stream 1 is 0'):
        batch_parts(np.array([0.95, 0.05]), 8)


def test_stratified_composition_per_global_batch():
    planner = make(batching_method='stratified')
    plan = planner.plan(world(), 1, 0)
    parts = batch_parts(planner.proportion_per_stream, 8)
    rows = global_batches(plan)
    full = rows[(rows >= 0).all(1)]
    assert len(full) == min(n // p for n, p in zip((120, 80, 40), parts.tolist(), strict=True))
    for row in full:
        assert np.bincount(stream_of(row), minlength=3).tolist() == parts.tolist()
        assert [stream_of(row[sum(parts[:i]):sum(parts[:i + 1])]).tolist() for i in range(3)] == \
            [[i] * p for i, p in enumerate(parts.tolist())]  # column blocks, stream by stream
    assert ((rows >= 0).all(1) | (rows < 0).all(1)).all()  # padding only in whole global batches


def test_per_stream_batches_are_pure_and_counted():
    planner = make(batching_method='per_stream')
    rows = global_batches(planner.plan(world(), 0, 0))
    full = rows[(rows >= 0).all(1)]
    assert len(full) == sum(n // 8 for n in (120, 80, 40))
    origins = [set(stream_of(row).tolist()) for row in full]
    assert all(len(o) == 1 for o in origins)
    assert [o.pop() for o in origins] != sorted(stream_of(full[:, 0]).tolist())  # streams are interleaved


def test_device_per_stream_device_batches_are_pure():
    planner = make(batching_method='device_per_stream', num_canonical_nodes=4)
    plan = planner.plan(world(), 2, 0)
    device_batches = plan.reshape(-1, plan.shape[-1])
    real = device_batches[(device_batches >= 0).all(1)]
    assert len(real) and all(len(set(stream_of(b).tolist())) == 1 for b in real)
    assert ((device_batches >= 0).all(1) | (device_batches < 0).all(1)).all()


def test_device_per_stream_loses_node_locality_like_the_reference():
    """PN=2, R=2, NCN=4: node 0 / rank 1 reads canonical rows 2-3 (node 1's group), as runtime.md 5.4 observes."""
    samples = (80, 80)
    planner = make(samples, batching_method='device_per_stream', num_canonical_nodes=4, shuffle=False)
    plan = planner.plan(world(2, 2, 1), 0, 0)
    ids = plan[0, 1][plan[0, 1] >= 0]
    within = ids % 80  # position inside its stream; canonical row c covers [20c, 20c + 20)
    assert set((within // 20).tolist()) <= {2, 3}
    ids = plan[0, 0][plan[0, 0] >= 0]
    assert set(((ids % 80) // 20).tolist()) <= {0, 1}


@pytest.mark.parametrize('method', METHODS)
def test_resumption_drops_whole_global_batches(method):
    planner = make(batching_method=method, num_canonical_nodes=4)
    shape = world(2, 2, 2)
    full = global_batches(planner.plan(shape, 1, 0))
    real = full[(full >= 0).any(1)]
    for k in (1, 3):
        resumed = global_batches(planner.plan(shape, 1, k * 8))
        resumed = resumed[(resumed >= 0).any(1)]
        assert (resumed == real[k:]).all()
    with pytest.warns(UserWarning, match='multiple of the current global batch size of 8'):
        unaligned = global_batches(planner.plan(shape, 1, 3 * 8 + 5))
    assert (unaligned[(unaligned >= 0).any(1)] == real[3:]).all()
    assert planner.plan(shape, 1, 0).shape[2] == 2  # padded to whole rounds of workers


@pytest.mark.parametrize('method', METHODS)
def test_no_shuffle_is_the_same_every_epoch(method):
    planner = make(batching_method=method, shuffle=False, num_canonical_nodes=4)
    plans = [planner.plan(world(), epoch, 0) for epoch in range(3)]
    assert all((p == plans[0]).all() for p in plans)


@pytest.mark.parametrize('method', METHODS)
@pytest.mark.parametrize('algo', ['py1e', 'py1br'])
def test_tiny_proportion_block_is_clamped_not_crashing(method, algo):
    """int(shuffle_block_size * proportion) is 0 here; the reference crashes, we use a block of 1 (py1br: 2)."""
    planner = make((400, 400, 8), shard=8, batching_method=method, shuffle_algo=algo, shuffle_block_size=20,
                   num_canonical_nodes=2, batch_size=32 if method == 'stratified' else 2)
    assert planner.stream_block_size(2) == 1
    plan = planner.plan(world(2, 2, 1), 0, 0)
    assert (plan >= 0).any()


def test_errors():
    with pytest.raises(ValueError, match='Number of samples for stream 2 is 0'):
        make((400, 400, 8), shard=8, batching_method='stratified', batch_size=1).plan(world(1, 2, 1), 0, 0)
    with pytest.raises(ValueError, match='too few to fill'):
        make((400, 8), shard=8, batching_method='stratified', batch_size=500).plan(world(1, 1, 1), 0, 0)
    with pytest.raises(ValueError, match='Stream with index 2 does not have an adequate number of samples'):
        make(batching_method='per_stream', batch_size=16).plan(world(), 0, 0)
    with pytest.raises(ValueError, match='divisible by the number of physical nodes'):
        make(batching_method='device_per_stream', num_canonical_nodes=3).plan(world(2, 1, 1), 0, 0)
    with pytest.raises(ValueError, match='one complete device batch'):
        make(batching_method='device_per_stream', num_canonical_nodes=2, batch_size=32).plan(world(), 0, 0)


def test_plan_node_is_the_slice():
    for method in METHODS:
        planner = make(batching_method=method, num_canonical_nodes=4)
        full = planner.plan(world(), 0, 16)
        for node in range(2):
            assert (planner.plan_node(world(), 0, 16, node) == full[node]).all()


REF_PYTHON = os.path.join(ROOT, '.venv-ref', 'bin', 'python')
#: First lines of every script run in the reference virtualenv: refuse to go on unless ``import streaming`` is
#: mosaicml-streaming 0.13 there (never our streaming-compat), see compat/reference_guard.py.
REF_GUARD = (f'import sys; sys.path.insert(0, {ROOT!r})\n'
             'from compat.reference_guard import assert_reference_streaming; assert_reference_streaming()\n')
REF_SCRIPT = REF_GUARD + textwrap.dedent('''
    import json, os, shutil, sys, tempfile, warnings, logging
    warnings.simplefilter('ignore'); logging.disable(logging.CRITICAL)
    import numpy as np
    from streaming import MDSWriter, StreamingDataset, Stream
    from streaming.base.batching import generate_work
    from streaming.base.world import World
    from streaming.base.util import clean_stale_shared_memory
    root = tempfile.mkdtemp()
    cfg = json.load(sys.stdin)
    rng = np.random.default_rng(0)
    srcs = []
    for i, n in enumerate(cfg['stream_samples']):
        d = os.path.join(root, f'src{i}')
        with MDSWriter(out=d, columns={'x': 'bytes'}, size_limit=400) as w:
            for k in range(n):
                w.write({'x': bytes(int(rng.integers(1, 60)))})
        srcs.append(d)
    results = []
    try:
        for j, c in enumerate(cfg['cases']):
            clean_stale_shared_memory()
            streams = [Stream(remote=s, local=os.path.join(root, f'l{j}_{i}'), **c['weights'][i])
                       for i, s in enumerate(srcs)]
            ds = StreamingDataset(streams=streams, batch_size=c['B'], shuffle=c['shuffle'], shuffle_algo=c['algo'],
                                  shuffle_seed=c['seed'], num_canonical_nodes=c['ncn'], shuffle_block_size=c['block'],
                                  batching_method=c['method'], partition_algo='orig', epoch_size=c['epoch_size'],
                                  sampling_method=c['sampling'])
            try:
                work = generate_work(c['method'], ds, World(c['PN'], c['R'], c['Wk'], 0), c['epoch'], c['drop'])
                out = work.tolist()
            except Exception as err:
                out = 'error: ' + type(err).__name__
            results.append({'work': out, 'samples_per_shard': ds.samples_per_shard.tolist(),
                            'stream_per_shard': ds.stream_per_shard.tolist(), 'epoch_size': int(ds.epoch_size),
                            'choose': [int(s.choose) for s in streams],
                            'proportion': [float(s.proportion) for s in streams]})
            del ds
            clean_stale_shared_memory()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(results))
''')


def _cases(seed, count):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        pn = int(rng.choice([1, 2]))
        kind = rng.choice(['none', 'proportion', 'repeat', 'choose'])
        weights = {'none': [{}, {}],
                   'proportion': [{'proportion': float(rng.uniform(0.2, 2))} for _ in range(2)],
                   'repeat': [{'repeat': float(rng.uniform(0.3, 2.5))} for _ in range(2)],
                   'choose': [{'choose': int(rng.integers(30, 250))} for _ in range(2)]}[str(kind)]
        cases.append(dict(weights=weights, B=int(rng.integers(1, 4)), shuffle=bool(rng.random() < 0.8),
                          algo=str(rng.choice(['py1e', 'py1s', 'py2s', 'py1br', 'naive'])),
                          seed=int(rng.integers(0, 1000)), ncn=pn * int(rng.integers(1, 3)),
                          block=int(rng.integers(4, 60)), method=str(rng.choice(['random', *METHODS])), PN=pn,
                          R=int(rng.integers(1, 3)), Wk=int(rng.integers(1, 3)), epoch=int(rng.integers(0, 3)),
                          drop=int(rng.choice([0, 0, int(rng.integers(0, 60))])),
                          epoch_size=int(rng.integers(100, 300)) if kind == 'proportion' and rng.random() < .5
                          else None,
                          sampling=str(rng.choice(['balanced', 'fixed']))))
    return cases


@pytest.mark.compat
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(REF_PYTHON), reason='no reference virtualenv at .venv-ref (make compat)')
def test_bit_exact_with_the_reference_generate_work():
    """Random cases over all four batching methods, weights, shuffles, drops: identical to the reference's plan."""
    cases = _cases(11, 30)
    proc = subprocess.run([REF_PYTHON, '-c', REF_SCRIPT], input=json.dumps({'stream_samples': [120, 80],
                                                                          'cases': cases}),
                          capture_output=True, text=True, timeout=500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    compared = 0
    for case, ref in zip(cases, json.loads(proc.stdout), strict=True):
        planner = EpochPlanner(np.array(ref['samples_per_shard']), np.bincount(ref['stream_per_shard']),
                               ref['choose'], ref['proportion'], ref['epoch_size'], case['B'], case['ncn'],
                               shuffle=case['shuffle'], shuffle_algo=case['algo'], shuffle_seed=case['seed'],
                               shuffle_block_size=case['block'], partition_algo='orig',
                               batching_method=case['method'], sampling_method=case['sampling'])
        shape = World(0, case['PN'] * case['R'], case['R'], 0, case['Wk'])
        if isinstance(ref['work'], str):  # the reference fails (e.g. a zero block); we clamp or raise clearly
            continue
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', message='Because of the')  # unaligned resumption, as the reference
            assert planner.plan(shape, case['epoch'], case['drop']).tolist() == ref['work'], case
        compared += 1
    assert compared >= 20


@pytest.mark.parametrize('method', ['stratified', 'per_stream', 'device_per_stream'])
def test_an_epoch_of_full_batches_only_then_the_next_epoch(tmp_path, method):
    """As the docs say: these methods yield only full batches, so an epoch can yield fewer samples than ``len()``;
    the loader's state after the loop ran out is the next epoch's start, and a resumed loop reads that epoch."""
    from streaming_core import Stream, StreamingDataLoader, StreamingDataset
    from streaming_mds import MDSWriter
    roots = []
    for start, count in ((0, 60), (100, 25)):
        roots.append(str(tmp_path / str(start)))
        with MDSWriter(out=roots[-1], columns={'id': 'int'}, size_limit=200) as writer:
            for i in range(start, start + count):
                writer.write({'id': i})

    def make():
        streams = [Stream(local=roots[0], proportion=0.7), Stream(local=roots[1], proportion=0.3)]
        dataset = StreamingDataset(streams=streams, batching_method=method, shuffle=True, batch_size=5)
        return StreamingDataLoader(dataset, batch_size=5)
    loader = make()
    first, second = ([b['id'].tolist() for b in loader] for _ in range(2))
    assert all(len(batch) == 5 for batch in first) and 5 * len(first) < len(loader.dataset)
    again = make()
    assert [b['id'].tolist() for b in again] == first
    state = again.state_dict()
    assert (state['epoch'], state['sample_in_epoch']) == (1, 0)
    resumed = make()
    resumed.load_state_dict(state)
    assert [b['id'].tolist() for b in resumed] == second
