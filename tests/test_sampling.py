"""Per-epoch resampling: ``get_sampling`` and the shuffle units / big-to-small map (runtime.md 1.5, section 10)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.ordering.sampling import get_sampling, resample


def test_get_sampling_spec_examples():
    assert get_sampling([5, 5, 5], 7, 1, 9176, 0, True).tolist() == [1, 4, 2]
    assert get_sampling([5, 5, 5], 22, 2, 9176, 3, True).tolist() == [7, 5, 10]


def test_get_sampling_whole_multiples_need_no_rng():
    assert get_sampling([3, 4, 5], 24, 7, 1, 2, True).tolist() == [6, 8, 10]
    assert get_sampling([3, 4, 5], 0, 1, 1, 2, True).tolist() == [0, 0, 0]


def test_get_sampling_use_epoch_switches_the_seed():
    fixed = [get_sampling([5] * 6, 13, 1, 4, epoch, False).tolist() for epoch in range(4)]
    assert all(f == fixed[0] for f in fixed)
    varied = [get_sampling([5] * 6, 13, 1, 4, epoch, True).tolist() for epoch in range(4)]
    assert len({tuple(v) for v in varied}) > 1
    assert varied[2] == get_sampling([5] * 6, 13, 1, 6, 0, True).tolist()  # seed + epoch


@pytest.mark.parametrize('kwargs, match', [
    (dict(choose=-1), 'choose'), (dict(granularity=0), 'granularity'), (dict(seed=-1), 'seed'),
    (dict(epoch=-2), 'epoch'),
])
def test_get_sampling_errors(kwargs, match):
    args = dict(samples_per_shard=[4, 4], choose=3, granularity=1, seed=0, epoch=0, use_epoch=True)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        get_sampling(**args)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12).filter(lambda s: sum(s) > 0), st.integers(0, 500),
       st.integers(1, 30), st.integers(0, 1000), st.integers(0, 10), st.booleans())
def test_get_sampling_properties(sizes, choose, granularity, seed, epoch, use_epoch):
    out = get_sampling(sizes, choose, granularity, seed, epoch, use_epoch)
    total = sum(sizes)
    assert int(out.sum()) == choose
    whole = choose // total
    sizes_a = np.array(sizes)
    assert (out >= whole * sizes_a).all() and (out <= (whole + 1) * sizes_a).all()
    assert out.tolist() == get_sampling(sizes, choose, granularity, seed, epoch, use_epoch).tolist()


def test_get_sampling_is_balanced_across_shards():
    """Per-shard sampling rate std/mean stays under 5%, averaged over granularities 1..99."""
    sizes = np.random.default_rng(0).integers(800, 1200, size=60)
    choose = int(sizes.sum() * 2.5)
    ratios = []
    for granularity in range(1, 100):
        rates = get_sampling(sizes, choose, granularity, 9176, 0, False) / sizes
        ratios.append(rates.std() / rates.mean())
    assert float(np.mean(ratios)) < 0.05


def _walk(chooses, sizes=(2, 2, 2, 2), **kwargs):
    res = resample(np.array(sizes), np.ones(len(sizes), np.int64), np.array(chooses), 9176, 0, **kwargs)
    return res.units.tolist(), res.small_per_big().tolist()


def test_resample_whole_and_partial_repeats_spec_walk():
    units, walk = _walk([0, 2, 4, 6])
    assert walk == [2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7]
    assert units == [2, 2, 2, 2, 2, 2]


def test_resample_partial_units_follow_whole_ones_and_are_sorted():
    sizes = np.array([10, 10])
    res = resample(sizes, np.array([2]), np.array([27]), 3, 1)
    units = res.units.tolist()
    assert units[0] == units[2] == 10 and units[1] + units[3] == 7 and len(units) == 4
    walk = res.small_per_big()
    first_partial = walk[10:10 + res.units[1]]
    assert (np.diff(first_partial) > 0).all() and set(first_partial.tolist()) <= set(range(10))
    assert res.size == 27 and not res.is_identity


def test_resample_single_stream_keeps_global_small_ids():
    sizes = np.array([3, 3, 4, 4])
    res = resample(sizes, np.array([2, 2]), np.array([6, 8]), 1, 0, stream_id=1)
    assert res.small_per_big().tolist() == list(range(6, 14))
    full = resample(sizes, np.array([2, 2]), np.array([6, 8]), 1, 0)
    assert full.is_identity and full.small_per_big().tolist() == list(range(14))


def test_resample_to_small_passes_padding_and_matches_the_array():
    sizes = np.array([5, 7, 3])
    res = resample(sizes, np.array([3]), np.array([31]), 2, 4, sampling_method='fixed')
    table = res.small_per_big()
    ids = np.array([[0, 5, -1], [30, 12, -1]])
    expect = np.where(ids >= 0, table[np.maximum(ids, 0)], -1)
    assert (res.to_small(ids) == expect).all()


def test_resample_fixed_vs_balanced_partial_picks():
    args = (np.array([4, 4]), np.array([2]), np.array([5]), 11)
    fixed = {tuple(resample(*args, e, sampling_method='fixed').small_per_big()) for e in range(6)}
    balanced = {tuple(resample(*args, e, sampling_method='balanced').small_per_big()) for e in range(6)}
    assert len(fixed) == 1 and len(balanced) > 1


def test_resample_balance_over_many_epochs():
    """choose=3 from a 2-sample stream: each sample is read 1.5x per epoch on average, within 2.5%."""
    counts = np.zeros(2)
    for epoch in range(1000):
        res = resample(np.array([2]), np.array([1]), np.array([3]), 9176, epoch, epoch_seed_change=True)
        counts += np.bincount(res.small_per_big(), minlength=2)
    assert np.all(np.abs(counts / 1500 - 1) < 0.025)


def test_resample_errors():
    with pytest.raises(ValueError, match='Invalid sampling method'):
        resample(np.array([2]), np.array([1]), np.array([2]), 0, 0, sampling_method='fancy')
    with pytest.raises(ValueError, match='Inconsistent stream tables'):
        resample(np.array([2, 2]), np.array([1]), np.array([2]), 0, 0)
    with pytest.raises(ValueError, match='out of range'):
        resample(np.array([2]), np.array([1]), np.array([2]), 0, 0, stream_id=3)
