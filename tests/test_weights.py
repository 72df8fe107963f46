"""Stream weighting (runtime.md 1.4) and the resulting walk orders (the reference's test_mixing)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.ordering.planner import EpochPlanner, apply_weights
from streaming_core.ordering.world import World

N4 = [None] * 4


def walk(proportions=N4, repeats=N4, chooses=N4, epoch_size=None, samples=(2, 2, 2, 2)):
    """Iterate 4 streams of 2 samples with NCN=1, B=1, no shuffle, one device: the sample order."""
    choose, proportion, _, size = apply_weights(list(proportions), list(repeats), list(chooses), list(samples),
                                                epoch_size, 9176)
    planner = EpochPlanner(np.array(samples), np.ones(len(samples), np.int64), choose, proportion, size, 1, 1)
    plan = planner.plan(World(), 0, 0)
    flat = plan.transpose(3, 2, 0, 1, 4).reshape(-1)
    return flat[flat >= 0].tolist()


def test_unweighted_walk_is_sequential():
    assert walk() == list(range(8))


def test_choose_walk_spec_vector():
    assert walk(chooses=[0, 2, 4, 6]) == [2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7]


def test_repeat_walk_equals_choose_walk():
    assert walk(repeats=[0, 1, 2, 3]) == [2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7]


def test_mixed_absolute_walk():
    out = walk(repeats=[None, 2, None, None], chooses=[None, None, 1, 0])
    assert out[:6] == [0, 1, 2, 3, 2, 3] and len(out) == 7 and out[6] in (4, 5)


def test_proportion_walks():
    assert walk(proportions=[1, 1, 1, 1]) == list(range(8))
    assert walk(proportions=[1, 1, 1, 1], epoch_size=16) == [0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7]
    out = walk(proportions=[1, 2, 3, 2])
    assert len(out) == 8 and out[0] in (0, 1) and out[1:5] == [2, 3, 4, 5] and out[5] in (4, 5)
    assert out[6:] == [6, 7]


def test_derived_values_absolute():
    choose, proportion, repeat, size = apply_weights(N4, N4, [0, 2, 4, 6], [2, 2, 2, 2], None, 0)
    assert choose == [0, 2, 4, 6] and size == 12
    assert proportion == pytest.approx([0, 2 / 12, 4 / 12, 6 / 12])
    assert repeat == [0.0, 1.0, 2.0, 3.0]
    choose, _, repeat, size = apply_weights(N4, [0.5, 1.25, None, None], [None, None, 3, None], [4, 4, 4, 4], None, 0)
    assert choose == [2, 5, 3, 4] and size == 14 and repeat == [0.5, 1.25, 0.75, 1.0]


def test_relative_normalises_and_fills_the_shortfall_with_choice():
    choose, proportion, repeat, size = apply_weights([1, 1, 1], [None] * 3, [None] * 3, [10, 20, 30], 10, 5)
    expect = np.full(3, 3)
    expect[np.random.default_rng(5).choice(3, 1, False)] += 1
    assert choose == expect.tolist() and size == 10
    assert proportion == pytest.approx([1 / 3] * 3)
    assert repeat == pytest.approx([c / s for c, s in zip(choose, [10, 20, 30], strict=True)])


def test_unspecified_with_epoch_size_is_proportional_to_samples():
    choose, proportion, _, size = apply_weights([None] * 2, [None] * 2, [None] * 2, [30, 10], 8, 1)
    assert choose == [6, 2] and size == 8 and proportion == pytest.approx([0.75, 0.25])


@pytest.mark.parametrize('args, match', [
    (([0.5, None], [None, 1], [None, None], [2, 2], None), 'Relative'),
    (([None, None], [1, None], [None, None], [2, 2], 10), 'Only provide `choose`'),
    (([None, None], [1, None], [None, 3], [2, 2], 5), 'Only provide `choose`'),
    (([0.5, None], [1, None], [None, None], [2, 2], None), 'at most one'),
    (([None, None], [-1, None], [None, None], [2, 2], None), 'non-negative'),
    (([None, None], [None, None], [0, 0], [2, 2], None), 'choose 0 samples'),
    (([0, 0], [None, None], [None, None], [2, 2], None), 'sum to 0'),
    (([None], [None], [None], [2, 2], None), 'one proportion'),
    (([None], [None], [None], [2], -5), 'negative'),
])
def test_apply_weights_errors(args, match):
    with pytest.raises(ValueError, match=match):
        apply_weights(*args, seed=0)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 1000), st.floats(0.01, 10)), min_size=1, max_size=8),
       st.one_of(st.none(), st.integers(1, 10**6)), st.integers(0, 10**6))
def test_relative_weights_sum_to_the_epoch_size(streams, epoch_size, seed):
    samples = [s for s, _ in streams]
    props = [p for _, p in streams]
    n = len(streams)
    choose, proportion, _, size = apply_weights(props, [None] * n, [None] * n, samples, epoch_size, seed)
    assert size == (epoch_size or sum(samples)) == sum(choose)
    assert sum(proportion) == pytest.approx(1)
    floors = [int(size * p) for p in np.array(props) / np.sum(props)]
    assert all(0 <= c - f <= 1 for c, f in zip(choose, floors, strict=True))
