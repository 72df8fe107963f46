"""The node-keyed ``py1n`` shuffle: permutation, node sets, independence of nodes, chunking, window spread."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streaming_py1e.py1n as py1n_module
from streaming_py1e.py1 import Py1e
from streaming_py1e.py1n import Py1n, node_rng
from streaming_py1e.spans import py1_spans

ALGO = Py1n()


def reference_node_sets(sizes, ncn, seed):
    """Each canonical node's sample set under py1e's run order (the same for every epoch)."""
    spans = py1_spans(sizes, ncn, seed, None)
    return [set(np.concatenate([np.arange(b, b + s) for b, s in zip(*spans.node(c), strict=True)] or [[]]).tolist())
            for c in range(ncn)]


def test_node_sets_are_py1e_node_sets():
    sizes = np.array([7, 3, 10, 1, 5, 9, 4])
    py1e = Py1e()(sizes, 2, 9176, 0, 8)
    assert reference_node_sets(sizes, 2, 9176) == [set(py1e[:19].tolist()), set(py1e[19:].tolist())]


@pytest.fixture(autouse=True)
def _no_block_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='Shuffle block size')
        yield


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 100), min_size=1, max_size=15), st.integers(1, 6), st.integers(0, 2**70),
       st.integers(1, 400))
def test_permutation_with_py1e_node_sets_every_epoch(sizes, ncn, seed, block):
    total = sum(sizes)
    expect = reference_node_sets(np.array(sizes), ncn, seed)
    for epoch in range(3):
        out = ALGO(np.array(sizes), ncn, seed, epoch, block)
        assert sorted(out.tolist()) == list(range(total))
        got = [set(out[c * total // ncn:(c + 1) * total // ncn].tolist()) for c in range(ncn)]
        assert got == expect


def test_epochs_seeds_and_nodes_differ():
    sizes = np.array([40] * 10)
    base = ALGO(sizes, 2, 1, 0, 64)
    assert (ALGO(sizes, 2, 1, 1, 64) != base).any()
    assert (ALGO(sizes, 2, 2, 0, 64) != base).any()
    assert (ALGO(sizes, 2, 1, 0, 64) == base).all()
    draws = {tuple(node_rng(s, e, n).integers(0, 1 << 62, 4).tolist())
             for s, e, n in [(1, 0, 0), (1, 0, 1), (1, 1, 0), (0, 1, 1), (2**32 + 1, 0, 0), (1, 2**32, 0)]}
    assert len(draws) == 6
    assert node_rng(5, 0, 0).integers(0, 1 << 62) != np.random.default_rng(5).integers(0, 1 << 62)
    with pytest.raises(ValueError):
        node_rng(-1, 0, 0)


def test_one_node_never_touches_the_others(monkeypatch):
    """node_share fills only the requested node: O(that node) work besides the O(units) span table."""
    sizes = np.array([25] * 40)
    full = ALGO(sizes, 8, 3, 2, 50)
    filled = []
    original = Py1n.fill_node

    def spy(self, spans, node, *args):
        filled.append(node)
        return original(self, spans, node, *args)

    monkeypatch.setattr(Py1n, 'fill_node', spy)
    share = ALGO.node_share(sizes, 8, 3, 2, 50, 5)
    assert filled == [5] and share.tolist() == full[5 * 125:6 * 125].tolist()


def test_result_does_not_depend_on_the_sort_chunk(monkeypatch):
    sizes = np.random.default_rng(1).integers(1, 300, size=200)
    expect = ALGO(sizes, 3, 9, 1, 40)
    monkeypatch.setattr(py1n_module, '_CHUNK', 64)
    assert (ALGO(sizes, 3, 9, 1, 40) == expect).all()


def test_small_shards_are_mixed_within_about_one_block():
    sizes = [10] * 200
    block = 200
    out = ALGO(sizes, 1, 4, 0, block)
    shard = out // 10
    windows = [len(set(shard[i:i + 50].tolist())) for i in range(0, 2000 - 50, 50)]
    assert min(windows) >= 5  # every 50 consecutive positions draw from several shards
    position = np.empty(2000, np.int64)
    position[out] = np.arange(2000)
    layout = np.empty(2000, np.int64)  # where each sample sat before spreading
    spans = py1_spans(np.array(sizes), 1, 4, None)
    perm = node_rng(4, 0, 0).permutation(len(spans.sizes))
    offset = 0
    for begin, size in zip(spans.begins[perm].tolist(), spans.sizes[perm].tolist(), strict=True):
        layout[begin:begin + size] = offset
        offset += size
    assert np.abs(position - layout).max() <= 1.25 * block  # spread stays within the window


def test_big_shards_warn_like_py1e():
    """py1n declares spreads_shards_within_block, so the planner warns for it as for py1e."""
    from streaming_core.ordering.planner import EpochPlanner
    from streaming_core.ordering.world import World
    planner = EpochPlanner(samples_per_shard=np.array([100, 100]), shards_per_stream=np.array([2]),
                           choose_per_stream=np.array([200]), proportion_per_stream=np.array([1.0]), epoch_size=200,
                           batch_size=1, num_canonical_nodes=1, shuffle=True, shuffle_algo='py1n',
                           shuffle_block_size=10)
    assert Py1n.spreads_shards_within_block and planner.order_warnings()
    with pytest.warns(UserWarning, match='Shuffle block size was smaller than shard size'):
        warnings.filterwarnings('always', message='Shuffle block size')
        planner.plan_node(World(), 0, 0, 0)


def test_empty_canonical_nodes_are_allowed():
    out = ALGO([2, 1], 5, 0, 0, 10)
    assert sorted(out.tolist()) == [0, 1, 2]
    assert ALGO.node_share([2, 1], 5, 0, 0, 10, 0).size == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match='positive shuffle_block_size'):
        ALGO([3, 3], 1, 0, 0, 0)
    with pytest.raises(ValueError, match='out of range'):
        ALGO.node_share([3, 3], 2, 0, 0, 8, 2)
