"""EpochPlanner: defaults, dispatch, random batching, plan_node (runtime.md 1.1, 5.1, 9.2, 12)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import streaming_core.ordering.planner as planning
from streaming_core.errors import UnknownNameError
from streaming_core.hookspecs import hookimpl
from streaming_core.machinery.discovery import register_plugin, unregister_plugin
from streaming_core.machinery.lookup import get_registry
from streaming_core.ordering.partition import get_partitions, traversal_order
from streaming_core.ordering.planner import (
    EpochPlanner,
    apply_weights,
    default_num_canonical_nodes,
    default_shuffle_block_size,
)
from streaming_core.ordering.sampling import get_sampling
from streaming_core.ordering.world import World

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger='streaming_core')


def make_planner(sizes=(7, 3, 10, 1, 5, 9, 4), shards_per_stream=None, chooses=None, **kwargs):
    sizes = np.array(sizes)
    shards_per_stream = np.array(shards_per_stream or [len(sizes)])
    bounds = np.concatenate([[0], np.cumsum(shards_per_stream)])
    samples = [int(sizes[bounds[i]:bounds[i + 1]].sum()) for i in range(len(shards_per_stream))]
    n = len(samples)
    choose, proportion, _, size = apply_weights([None] * n, [None] * n, chooses or [None] * n, samples, None,
                                                kwargs.get('shuffle_seed', 9176))
    args = dict(batch_size=2, num_canonical_nodes=2)
    args.update(kwargs)
    return EpochPlanner(sizes, shards_per_stream, choose, proportion, size, **args)


def world(nodes=1, ranks=1, workers=1):
    return World(rank=0, world_size=nodes * ranks, local_world_size=ranks, workers_per_rank=workers)


def test_defaults():
    assert default_num_canonical_nodes('py1e', 3) == 3
    assert default_num_canonical_nodes('py1s', 3) == 192 and default_num_canonical_nodes('py2s', 1) == 64
    assert default_shuffle_block_size(1) == 4_000_000 and default_shuffle_block_size(64) == 262144
    assert default_shuffle_block_size(10) == 400_000
    with pytest.raises(ValueError):
        default_num_canonical_nodes('py1e', 0)


def test_planner_validation_and_batch_size():
    with pytest.raises(ValueError, match='epoch_size'):
        EpochPlanner(np.array([3]), np.array([1]), np.array([3]), np.array([1.0]), 4, 1, 1)
    with pytest.raises(ValueError, match='shards_per_stream'):
        EpochPlanner(np.array([3, 3]), np.array([1]), np.array([3]), np.array([1.0]), 3, 1, 1)
    with pytest.raises(ValueError, match='Invalid sampling method'):
        make_planner(sampling_method='random')
    planner = make_planner(batch_size=None)
    with pytest.raises(ValueError, match='Please pass `batch_size`'):
        planner.plan(world(), 0, 0)
    assert make_planner(batch_size=np.int64(2)).plan(world(), 0, 0).shape[-1] == 2  # numpy ints are fine


def test_unknown_names_raise_the_registry_error():
    with pytest.raises(UnknownNameError, match='batching method'):
        make_planner(batching_method='nope').plan(world(), 0, 0)
    with pytest.raises(UnknownNameError, match='shuffle algorithm'):
        make_planner(shuffle=True, shuffle_algo='nope').plan(world(), 0, 0)
    make_planner(shuffle=False, shuffle_algo='nope').plan(world(), 0, 0)  # only looked up when shuffling


def test_plan_dispatches_through_the_batching_registry():
    assert get_registry('batching').get('random') is planning.random_batching
    planner = make_planner(shuffle=True, shuffle_block_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        plan = planner.plan(world(2, 1, 1), 0, 0)
        perm = planner.shuffle_units(planner.resample(0)[0], 0)
    expect = get_partitions('relaxed', 39, 2, 2, 1, 1, 2)
    expect = np.where(expect >= 0, perm[expect], -1)
    assert plan.dtype == np.int64 and (plan == expect).all()


def test_sequential_order_with_one_canonical_node():
    planner = make_planner(num_canonical_nodes=1, batch_size=3)
    flat = traversal_order(planner.plan(world(1, 1, 4), 0, 0))
    assert flat[flat >= 0].tolist() == list(range(39))


@pytest.mark.parametrize('algo', ['py1e', 'py1n', 'py1s', 'py2s', 'py1br', 'naive'])
def test_single_device_gets_every_sample_once(algo):
    planner = make_planner(sizes=[50] * 8, shuffle=True, shuffle_algo=algo, num_canonical_nodes=4,
                           shuffle_block_size=64)
    plan = planner.plan(world(1, 1, 3), 1, 0)
    values = plan[plan >= 0]
    assert sorted(values.tolist()) == list(range(400))
    again = make_planner(sizes=[50] * 8, shuffle=True, shuffle_algo=algo, num_canonical_nodes=4,
                         shuffle_block_size=64)
    assert (again.plan(world(1, 1, 3), 1, 0) == plan).all()
    assert (pickle.loads(pickle.dumps(planner)).plan(world(1, 1, 3), 1, 0) == plan).all()


def test_epoch_size_padding_to_canonical_nodes():
    planner = make_planner(num_canonical_nodes=4, batch_size=1)  # 39 samples over 4 canonical nodes
    plan = planner.plan(world(4, 1, 1), 0, 0)
    assert (plan >= 0).sum() == -(-39 // 4) * 4


def test_elastic_global_batches_are_the_same_sets():
    """Same NCN and global batch size: the same global batches for any node/rank/batch layout (runtime.md 3.2)."""
    kwargs = dict(sizes=[12] * 16, shuffle=True, shuffle_algo='py1e', num_canonical_nodes=4, shuffle_block_size=20)
    layouts = [(1, 4, 4), (2, 2, 4), (4, 1, 4), (4, 2, 2), (2, 8, 1)]  # (nodes, ranks, batch), GBS 16
    seen = []
    for nodes, ranks, batch in layouts:
        plan = make_planner(batch_size=batch, **kwargs).plan(world(nodes, ranks, 2), 3, 0)
        seen.append([sorted(r) for r in traversal_order(plan).reshape(-1, 16).tolist()])
    assert all(s == seen[0] for s in seen)


def test_resumption_skips_exactly_the_seen_global_batches():
    planner = make_planner(sizes=[10] * 24, shuffle=True, num_canonical_nodes=2, batch_size=3,
                           shuffle_block_size=30)
    shape = world(2, 2, 2)
    gbs = 12
    full = traversal_order(planner.plan(shape, 1, 0)).reshape(-1, gbs)
    for k in (1, 5, 19):
        resumed = traversal_order(planner.plan(shape, 1, k * gbs)).reshape(-1, gbs)
        assert [sorted(r) for r in resumed.tolist()[:20 - k]] == [sorted(r) for r in full.tolist()[k:20]]
        seen = full[:k].reshape(-1).tolist()
        rest = resumed.reshape(-1)
        assert sorted(seen + rest[rest >= 0].tolist()) == list(range(240))


def test_py1e_refuses_empty_canonical_nodes():
    with pytest.raises(ValueError, match='canonical node is 0'), pytest.warns(UserWarning, match='Trying to partition'):
        make_planner(sizes=[3], shuffle=True, num_canonical_nodes=8).plan(world(8, 1, 1), 0, 0)


def test_fixed_vs_balanced_sampling_across_epochs():
    def multisets(method):
        planner = make_planner(sizes=[5, 5, 5, 5], chooses=[30], shuffle=True, sampling_method=method,
                               num_canonical_nodes=1, shuffle_block_size=8)
        out = []
        for epoch in range(4):
            plan = planner.plan(world(), epoch, 0)
            out.append(tuple(np.bincount(plan[plan >= 0], minlength=20).tolist()))
        return set(out)
    assert len(multisets('fixed')) == 1
    assert len(multisets('balanced')) > 1


def test_replicated_ranks_read_the_same_slice():
    planner = make_planner(sizes=[10] * 8, shuffle=True, num_canonical_nodes=2, shuffle_block_size=16)
    base = World(rank=0, world_size=8, local_world_size=4, workers_per_rank=1)
    parallel = base.replicate(2)
    plan = planner.plan(parallel, 0, 0)
    slices = {}
    for rank in range(8):
        w = World(rank=rank, world_size=8, local_world_size=4).replicate(2)
        slices.setdefault(rank // 2, []).append(plan[w.node, w.rank_of_node].tolist())
    assert all(a == b for a, b in slices.values())
    with pytest.raises(ValueError, match='divisible'):
        base.replicate(3)
    with pytest.raises(ValueError, match='positive'):
        base.replicate(-1)


@st.composite
def configs(draw):
    nstreams = draw(st.integers(1, 3))
    shards = [draw(st.integers(1, 5)) for _ in range(nstreams)]
    sizes = [draw(st.integers(1, 40)) for _ in range(sum(shards))]
    chooses = None
    if draw(st.booleans()):
        bounds = np.concatenate([[0], np.cumsum(shards)])
        chooses = [draw(st.integers(1, 2 * int(sum(sizes[bounds[i]:bounds[i + 1]])))) for i in range(nstreams)]
    nodes = draw(st.integers(1, 4))
    ncn = draw(st.sampled_from([nodes, 2 * nodes, 3 * nodes, max(1, nodes // 2)]))
    return dict(sizes=sizes, shards_per_stream=shards, chooses=chooses, num_canonical_nodes=ncn,
                batch_size=draw(st.integers(1, 3)), shuffle=draw(st.booleans()),
                shuffle_algo=draw(st.sampled_from(['py1e', 'py1n', 'py1s', 'py1b', 'py1br', 'py2s', 'naive'])),
                shuffle_seed=draw(st.integers(0, 50)), shuffle_block_size=draw(st.integers(1, 60)),
                partition_algo=draw(st.sampled_from(['orig', 'relaxed'])),
                initial_physical_nodes=draw(st.sampled_from([None, 1, 2, 3]))), (
        nodes, draw(st.integers(1, 3)), draw(st.integers(1, 2)))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs(), st.integers(0, 2), st.integers(0, 200))
def test_plan_node_equals_the_slice_of_plan(config, epoch, drop):
    kwargs, (nodes, ranks, workers) = config
    planner = make_planner(**kwargs)
    shape = world(nodes, ranks, workers)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            full = planner.plan(shape, epoch, min(drop, planner.epoch_size))
        except ValueError:
            assume(False)
        for node in range(nodes):
            got = planner.plan_node(shape, epoch, min(drop, planner.epoch_size), node)
            assert got.shape == full[node].shape and (got == full[node]).all()


@pytest.mark.parametrize('algo', ['py1e', 'py1n', 'py1s'])
def test_plan_node_fast_path_builds_neither_the_partition_nor_the_shuffle(algo, monkeypatch):
    planner = make_planner(sizes=[30] * 20, shuffle=True, shuffle_algo=algo, num_canonical_nodes=8,
                           shuffle_block_size=50, batch_size=4)
    shape = world(4, 2, 2)
    expect = planner.plan(shape, 2, 48)

    def forbidden(*args, **kwargs):
        raise AssertionError('the fast path built something global')

    monkeypatch.setattr(planning, 'get_partitions', forbidden)
    monkeypatch.setattr(type(planner.shuffle_algorithm()), '__call__', forbidden)
    for node in range(4):
        assert (planner.plan_node(shape, 2, 48, node) == expect[node]).all()


def test_plan_node_rejects_bad_nodes():
    with pytest.raises(ValueError, match='out of range'):
        make_planner().plan_node(world(2), 0, 0, 2)


REF_PYTHON = os.path.join(ROOT, '.venv-ref', 'bin', 'python')
#: First lines of every script run in the reference virtualenv: refuse to go on unless ``import streaming`` is
#: mosaicml-streaming 0.13 there (never our streaming-compat), see compat/reference_guard.py.
REF_GUARD = (f'import sys; sys.path.insert(0, {ROOT!r})\n'
             'from compat.reference_guard import assert_reference_streaming; assert_reference_streaming()\n')
COMPAT_SCRIPT = REF_GUARD + textwrap.dedent('''
    import json, sys, warnings
    import numpy as np
    warnings.simplefilter('ignore')
    import logging; logging.disable(logging.CRITICAL)
    from streaming.base.partition import get_partitions
    from streaming.base.shuffle import get_shuffle
    from streaming.base.sampling import get_sampling
    cases = json.load(sys.stdin)
    out = {'partitions': [], 'shuffles': [], 'samplings': []}
    for args in cases['partitions']:
        try:
            out['partitions'].append(get_partitions(*args).tolist())
        except Exception as err:
            out['partitions'].append('error: ' + type(err).__name__)
    for algo, sizes, ncn, seed, epoch, block in cases['shuffles']:
        out['shuffles'].append(get_shuffle(algo, np.array(sizes), ncn, seed, epoch, block).tolist())
    for sizes, *args in cases['samplings']:
        out['samplings'].append(get_sampling(np.array(sizes), *args).tolist())
    print(json.dumps(out))
''')


@pytest.mark.compat
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(REF_PYTHON), reason='no reference virtualenv at .venv-ref (make compat)')
def test_bit_exact_with_the_reference():
    rng = np.random.default_rng(7)
    partitions = []
    for _ in range(150):
        pn = int(rng.integers(1, 5))
        ncn = int(pn * rng.integers(1, 4)) if rng.random() < 0.7 else max(1, pn // 2)
        num = int(rng.integers(0, 300))
        algo = 'relaxed' if rng.random() < 0.3 else 'orig'
        partitions.append([algo, num, ncn, pn, int(rng.integers(1, 4)), int(rng.integers(1, 3)),
                           int(rng.integers(1, 4)), int(rng.integers(0, num + 1)),
                           int(rng.integers(1, 4)) if algo == 'relaxed' else None])
    shuffles = []
    for algo in ('py1e', 'py1s', 'py2s', 'py1br', 'naive'):
        for _ in range(25):
            sizes = rng.integers(1, 60, size=int(rng.integers(1, 12))).tolist()
            shuffles.append([algo, sizes, int(rng.integers(1, 4)), int(rng.integers(0, 10**6)),
                             int(rng.integers(0, 4)), int(rng.integers(2, 100))])
    samplings = [[rng.integers(1, 30, size=5).tolist(), int(rng.integers(0, 400)), int(rng.integers(1, 9)),
                  int(rng.integers(0, 1000)), int(rng.integers(0, 5)), bool(rng.random() < 0.5)] for _ in range(50)]
    cases = {'partitions': partitions, 'shuffles': shuffles, 'samplings': samplings}
    proc = subprocess.run([REF_PYTHON, '-c', COMPAT_SCRIPT], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ref = json.loads(proc.stdout)
    registry = get_registry('shuffle')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for args, expect in zip(partitions, ref['partitions'], strict=True):
            if expect == 'error: ValueError':
                with pytest.raises(ValueError):
                    get_partitions(*args)
                continue
            try:
                got = get_partitions(*args).tolist()
            except ValueError:
                got = 'error: ValueError'
            if isinstance(expect, str):  # the reference crashes (e.g. ZeroDivisionError for 0 samples)
                continue
            assert got == expect, args
        for (algo, sizes, ncn, seed, epoch, block), expect in zip(shuffles, ref['shuffles'], strict=True):
            got = registry.get(algo)(np.array(sizes), ncn, seed, epoch, block).tolist()
            assert got == expect, (algo, sizes, ncn, seed, epoch, block)
        for args, expect in zip(samplings, ref['samplings'], strict=True):
            assert get_sampling(*args).tolist() == expect, args


class _ReverseNodes:
    """A third-party shuffle that provides only ``node_share`` (no ``nodes_share``, no ``dtype``)."""

    calls = 0

    def __call__(self, sizes, ncn, seed, epoch, block):
        return np.concatenate([self.node_share(sizes, ncn, seed, epoch, block, c) for c in range(ncn)] or [[]])

    def node_share(self, sizes, ncn, seed, epoch, block, node):
        type(self).calls += 1
        total = int(np.sum(sizes))
        return np.arange(node * total // ncn, (node + 1) * total // ncn, dtype=np.int64)[::-1].copy()


class _ReversePlugin:
    @hookimpl
    def register_shuffle_algorithms(self, registry):
        registry.add('reverse_nodes', _ReverseNodes())


def test_third_party_node_share_is_used_by_plan_node():
    register_plugin(_ReversePlugin(), 'test_reverse_nodes')
    try:
        planner = make_planner(sizes=[10] * 12, shuffle=True, shuffle_algo='reverse_nodes', num_canonical_nodes=4)
        shape = world(2, 2, 1)
        full = planner.plan(shape, 0, 0)
        _ReverseNodes.calls = 0
        for node in range(2):
            assert (planner.plan_node(shape, 0, 0, node) == full[node]).all()
        assert _ReverseNodes.calls == 4  # two canonical nodes per physical node, nothing else
    finally:
        unregister_plugin('test_reverse_nodes')
