"""The reference shuffles, bit-exact (runtime.md 4.4-4.9), and their per-node computation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.machinery.lookup import get_registry
from streaming_core.ordering.planner import BLOCK_WARNING, EpochPlanner
from streaming_core.ordering.world import World
from streaming_py1e.py1 import Py1b, Py1br, Py1e, Py1s, py1br_blocks
from streaming_py1e.py2s import Py2s
from streaming_py1e.replay import Scratch, skip_uniform

SIZES = [7, 3, 10, 1, 5, 9, 4]
VECTORS = {
    'py1s': [38, 36, 37, 35, 7, 9, 8, 27, 26, 15, 12, 10, 16, 18, 17, 19, 11, 14, 13, 6, 2, 4, 1, 0, 5, 3, 20, 25, 23,
             24, 22, 21, 32, 30, 29, 33, 34, 31, 28],
    'py2s': [35, 37, 38, 36, 8, 7, 9, 30, 29, 18, 17, 16, 19, 15, 14, 11, 10, 13, 12, 6, 4, 5, 3, 2, 0, 1, 20, 24, 25,
             22, 23, 21, 34, 27, 32, 31, 33, 26, 28],
    'py1br': [7, 37, 35, 38, 11, 27, 26, 10, 8, 9, 36, 15, 16, 14, 19, 13, 12, 18, 17, 6, 3, 4, 0, 20, 2, 5, 1, 23, 22,
              30, 24, 28, 25, 29, 31, 21, 32, 33, 34],
    'py1e': [38, 36, 37, 27, 7, 35, 8, 26, 9, 15, 12, 10, 16, 18, 17, 19, 11, 14, 13, 0, 5, 4, 6, 3, 2, 1, 24, 23, 22,
             20, 21, 25, 28, 33, 32, 29, 30, 31, 34],
}
PY1E_EPOCH1 = [35, 38, 36, 37, 8, 9, 26, 7, 27, 19, 17, 13, 12, 18, 15, 16, 11, 10, 14, 29, 31, 30, 33, 28, 32, 34, 21,
               23, 22, 24, 25, 20, 0, 1, 2, 6, 4, 5, 3]
ALGOS = ['py1b', 'py1br', 'py1e', 'py1s', 'py2s', 'py1n']
NODE_WISE = ['py1b', 'py1br', 'py1e', 'py1s', 'py1n']


@pytest.fixture(autouse=True)
def _no_block_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='Shuffle block size')
        yield


def test_registration():
    registry = get_registry('shuffle')
    for name in ALGOS:
        assert registry.origin(name) == 'py1e' and registry.get(name).name == name


@pytest.mark.parametrize('name', sorted(VECTORS))
def test_spec_vectors(name):
    assert get_registry('shuffle').get(name)(np.array(SIZES), 2, 9176, 0, 8).tolist() == VECTORS[name]


def test_py1e_epoch_one_vector():
    assert Py1e()(SIZES, 2, 9176, 1, 8).tolist() == PY1E_EPOCH1


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(ALGOS), st.lists(st.integers(1, 100), min_size=1, max_size=12), st.integers(1, 3),
       st.integers(0, 2))
def test_permutation_and_node_sets_constant_across_epochs(name, sizes, ncn, seed):
    """The reference's test_shuffle: block 300, epochs 0-2."""
    algo = get_registry('shuffle').get(name)
    total = sum(sizes)
    node_sets = None
    for epoch in range(3):
        out = algo(np.array(sizes), ncn, seed, epoch, 300)
        assert out.dtype == np.int64 and sorted(out.tolist()) == list(range(total))
        sets = [set(out[c * total // ncn:(c + 1) * total // ncn].tolist()) for c in range(ncn)]
        assert node_sets is None or sets == node_sets
        node_sets = sets


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(NODE_WISE), st.lists(st.integers(1, 80), min_size=1, max_size=14), st.integers(1, 5),
       st.integers(0, 10**9), st.integers(0, 4), st.integers(1, 120), st.data())
def test_node_share_is_the_slice(name, sizes, ncn, seed, epoch, block, data):
    algo = get_registry('shuffle').get(name)
    total = sum(sizes)
    if name == 'py1e' and total < ncn:
        with pytest.raises(ValueError, match='canonical node is 0'):
            algo.node_share(np.array(sizes), ncn, seed, epoch, block, 0)
        return
    full = algo(np.array(sizes), ncn, seed, epoch, block)
    node = data.draw(st.integers(0, ncn - 1))
    share = algo.node_share(np.array(sizes), ncn, seed, epoch, block, node)
    assert share.tolist() == full[node * total // ncn:(node + 1) * total // ncn].tolist()
    nodes = data.draw(st.sets(st.integers(0, ncn - 1), max_size=3))
    shares = algo.nodes_share(np.array(sizes), ncn, seed, epoch, block, nodes, dtype=np.uint32)
    for c in nodes:
        assert shares[c].dtype == np.uint32
        assert shares[c].tolist() == full[c * total // ncn:(c + 1) * total // ncn].tolist()


def test_skip_uniform_matches_drawing():
    for prime_u32 in (False, True):
        drawn, skipped = np.random.default_rng(3), np.random.default_rng(3)
        if prime_u32:  # leaves half a 64-bit output cached for the next 32-bit draw
            drawn.integers(0, 7)
            skipped.integers(0, 7)
        drawn.uniform(-2.5, 3.0, 1234)
        skip_uniform(skipped, 1234)
        assert drawn.integers(0, 1 << 20, 9).tolist() == skipped.integers(0, 1 << 20, 9).tolist()


def test_scratch_shuffle_matches_shuffling_data():
    drawn, replayed = np.random.default_rng(5), np.random.default_rng(5)
    scratch = Scratch()
    for n in (0, 1, 2, 17, 1000, 5):
        drawn.shuffle(np.arange(n))
        scratch.shuffle(replayed, n)
    assert drawn.integers(0, 1 << 30, 5).tolist() == replayed.integers(0, 1 << 30, 5).tolist()


def test_py1br_first_blocks_overlap_by_the_stagger():
    assert py1br_blocks(300, 30, lambda: 100) == [(0, 70), (40, 140), (140, 240), (240, 300)]
    assert py1br_blocks(50, 0, lambda: 100) == [(0, 50)]


def test_block_size_validation_and_small_blocks():
    with pytest.raises(ValueError, match='positive shuffle_block_size'):
        Py1e()(SIZES, 2, 0, 0, 0)
    with pytest.raises(ValueError, match='positive shuffle_block_size'):
        Py1br()(SIZES, 2, 0, 0, -3)
    assert (Py1br()(SIZES, 2, 0, 0, 1) == Py1br()(SIZES, 2, 0, 0, 2)).all()  # 1 acts as 2 (the reference crashes)
    assert sorted(Py1e()(SIZES, 2, 0, 0, 1).tolist()) == list(range(39))


def block_planner(sizes, block, algo='py1e'):
    """A one-stream, one-node planner shuffling ``sizes`` with ``algo`` and block size ``block``."""
    total = int(sum(sizes))
    return EpochPlanner(samples_per_shard=np.array(sizes), shards_per_stream=np.array([len(sizes)]),
                        choose_per_stream=np.array([total]), proportion_per_stream=np.array([1.0]), epoch_size=total,
                        batch_size=1, num_canonical_nodes=1, shuffle=True, shuffle_algo=algo,
                        shuffle_block_size=block)


def test_py1e_warns_when_a_shard_exceeds_its_window():
    """The warning is the planner's (so a cached plan warns too): py1e declares spreads_shards_within_block."""
    assert Py1e.spreads_shards_within_block and not Py1s.spreads_shards_within_block
    with pytest.warns(UserWarning, match='Shuffle block size was smaller than shard size'):
        warnings.filterwarnings('always', message='Shuffle block size')
        block_planner([50, 50], 8).plan(World(), 0, 0)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        block_planner([5, 5], 100).plan(World(), 0, 0)
        block_planner([50, 50], 8, 'py1s').plan(World(), 0, 0)  # py1s ignores the block: nothing to warn about
        Py1e()([50, 50], 1, 0, 0, 8)  # the shuffle itself no longer warns (the planner does, once per plan)
    assert 'shuffle_block_size' in BLOCK_WARNING


def test_py1e_refuses_empty_canonical_nodes():
    with pytest.raises(ValueError, match='The number of samples assigned to a canonical node is 0'):
        Py1e()([2, 1], 4, 0, 0, 10)


def test_py1e_spreads_shards_within_a_window():
    """Every sample of a small shard lands within about one block of its shard's slot."""
    sizes = [20] * 50
    out = Py1e()(sizes, 1, 7, 0, 100)
    position = np.empty(1000, np.int64)
    position[out] = np.arange(1000)
    shard_of = np.arange(1000) // 20
    spans = [position[shard_of == k].max() - position[shard_of == k].min() for k in range(50)]
    assert max(spans) <= 125 and np.mean(spans) > 40


def test_py1s_keeps_pieces_contiguous_and_py1b_blocks_fixed():
    out = Py1s()([10, 10, 10], 1, 4, 0, 8)
    pieces = [sorted(out[i:i + 10].tolist()) for i in (0, 10, 20)]
    assert sorted(p[0] for p in pieces) == [0, 10, 20] and all(p == list(range(p[0], p[0] + 10)) for p in pieces)
    assert isinstance(Py1b()([10, 10, 10], 1, 4, 0, 8), np.ndarray)


def test_errors_for_bad_arguments():
    for algo in (Py1e(), Py2s(), Py1s()):
        with pytest.raises(ValueError, match='num_canonical_nodes'):
            algo(SIZES, 0, 1, 0, 8)
        with pytest.raises(ValueError, match='seed'):
            algo(SIZES, 1, -1, 0, 8)
        with pytest.raises(ValueError, match='non-negative'):
            algo([3, -1], 1, 1, 0, 8)
    with pytest.raises(ValueError, match='out of range'):
        Py1e().node_share(SIZES, 2, 0, 0, 8, 2)
