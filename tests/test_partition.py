"""Partitioning (runtime.md section 3 and the reference's test_partition)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streaming_core.ordering.partition import (
    canonical_stream,
    get_partitions,
    node_positions,
    rank_pad,
    traversal_order,
)
from streaming_py1e.spans import divide_spans


@pytest.fixture(autouse=True)
def _quiet(caplog):
    caplog.set_level(logging.ERROR, logger='streaming_core')


def test_spec_example_rank_padding():
    out = get_partitions('orig', 10, 2, 2, 2, 1, 2)
    assert out.tolist() == [[[[[0, 2], [4, -1]]], [[[1, 3], [3, -1]]]], [[[[5, 7], [9, -1]]], [[[6, 8], [8, -1]]]]]


def test_spec_example_short_row():
    out = get_partitions('orig', 11, 3, 1, 2, 2, 2)
    assert out[0, 0].tolist() == [[[0, 7], [9, 6]], [[4, 2], [-1, -1]]]
    assert out[0, 1].tolist() == [[[3, 1], [2, 10]], [[8, 5], [-1, -1]]]


def test_shape_for_every_drop_first():
    for drop in range(500):
        assert get_partitions('orig', 1000, 176, 22, 8, 8, 10, drop).shape == (22, 8, 8, 1, 10)


def test_drop_everything_and_beyond():
    out = get_partitions('orig', 1000, 176, 22, 8, 8, 10, 1056)
    assert out.shape == (22, 8, 8, 0, 10) and out.size == 0
    with pytest.raises(ValueError, match=r'Resuming further into the dataset \(1057\) than it has samples \(1000\)'):
        get_partitions('orig', 1000, 176, 22, 8, 8, 10, 1057)


def test_drop_first_is_rounded_down_to_the_node_count(caplog):
    caplog.set_level(logging.WARNING, logger='streaming_core')
    assert (get_partitions('orig', 100, 4, 4, 1, 1, 1, 7) == get_partitions('orig', 100, 4, 4, 1, 1, 1, 4)).all()
    assert 'Rounding it down' in caplog.text


@pytest.mark.parametrize('num_samples, batch_size', [(1, 1), (5, 2), (7, 3), (12, 5)])
def test_small_datasets_give_ceil_batches(num_samples, batch_size):
    out = get_partitions('orig', num_samples, 1, 1, 1, 1, batch_size)
    assert out.shape == (1, 1, 1, -(-num_samples // batch_size), batch_size)
    flat = out.reshape(-1)
    assert flat[flat >= 0].tolist() == list(range(num_samples))


def test_fewer_samples_than_canonical_nodes_warns():
    with pytest.warns(UserWarning, match='Trying to partition 3 samples over 8 canonical nodes'):
        out = get_partitions('orig', 3, 8, 8, 1, 1, 1)
    assert set(out[out >= 0].tolist()) == {0, 1, 2}


def test_too_few_samples_for_the_ranks_warns():
    with pytest.warns(UserWarning, match='Attempting to partition 4 samples per node over 8 ranks'):
        out = get_partitions('orig', 4, 1, 1, 8, 1, 1)
    assert out.shape == (1, 8, 1, 1, 1) and sorted(out.reshape(-1).tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_incompatible_node_counts():
    with pytest.raises(ValueError, match='Either canonical or physical nodes must be evenly divisible'):
        get_partitions('orig', 100, 3, 2, 1, 1, 1)
    with pytest.raises(ValueError, match='partition_algo'):
        get_partitions('fancy', 100, 2, 2, 1, 1, 1)
    with pytest.raises(ValueError, match='ranks_per_node'):
        get_partitions('orig', 100, 2, 2, 0, 1, 1)


def test_no_drops_or_repeats_when_everything_divides():
    for ncn, pn, ranks, workers, batch in [(4, 2, 2, 3, 5), (2, 4, 2, 1, 3), (8, 8, 1, 2, 2)]:
        num = ncn * pn * ranks * workers * batch * 3
        out = get_partitions('orig', num, ncn, pn, ranks, workers, batch)
        assert sorted(out.reshape(-1).tolist()) == list(range(num))


def test_ratio_padding_repeats_samples_near_the_row_end():
    out = get_partitions('orig', 10, 1, 4, 1, 1, 1)  # spcn 10, ratio 4, pad 2: row padded to 12
    flat = out.reshape(4, -1)
    assert flat.size == 12 and set(flat.reshape(-1).tolist()) == set(range(10))


@st.composite
def shapes(draw, max_samples=400):
    pn = draw(st.integers(1, 6))
    ncn = pn * draw(st.integers(1, 4)) if draw(st.booleans()) else max(1, pn // draw(st.sampled_from([1, 2, 3])))
    assume(max(ncn, pn) % min(ncn, pn) == 0)
    return (draw(st.integers(0, max_samples)), ncn, pn, draw(st.integers(1, 4)), draw(st.integers(1, 3)),
            draw(st.integers(1, 4)))


@settings(max_examples=200, deadline=None)
@given(shapes())
def test_every_sample_appears_and_padding_only_trails(shape):
    num, ncn, pn, ranks, workers, batch = shape
    assume(num >= max(ncn, 1))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            out = get_partitions('orig', num, ncn, pn, ranks, workers, batch)
        except ValueError as err:
            assert 'Cannot pad canonical rows' in str(err)
            return
    assert set(range(num)) <= set(out[out >= 0].tolist())
    per_worker = out.reshape(pn * ranks * workers, -1)
    for row in per_worker:
        pads = np.flatnonzero(row < 0)
        assert not len(pads) or (pads == np.arange(len(row) - len(pads), len(row))).all()


@settings(max_examples=200, deadline=None)
@given(shapes(), st.integers(0, 500))
def test_closed_form_and_global_batches(shape, drop):
    """Device (p, r) reads S'[m*W + p + r*PN]; global batch q is the chunk S'[q*GBS, (q+1)*GBS) as a set."""
    num, ncn, pn, ranks, workers, batch = shape
    assume(num > ncn)
    drop = min(drop, num) - min(drop, num) % pn
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            stream = canonical_stream(num, ncn, pn, drop)
        except ValueError:
            return
        assume(len(stream) % (pn * ranks) == 0)  # no rank padding
        out = get_partitions('orig', num, ncn, pn, ranks, workers, batch, drop)
    world = pn * ranks
    for p in range(pn):
        for r in range(ranks):
            device = out[p, r].transpose(1, 0, 2).reshape(-1)
            device = device[device >= 0]
            assert device.tolist() == stream[p + r * pn::world].tolist()
    gbs = world * batch
    order = traversal_order(out).reshape(-1, gbs)
    for q, rows in enumerate(order):
        got = sorted(x for x in rows.tolist() if x >= 0)
        assert got == sorted(stream[q * gbs:(q + 1) * gbs].tolist())


@settings(max_examples=200, deadline=None)
@given(shapes(), st.integers(0, 500))
def test_node_positions_match_the_orig_slice(shape, drop):
    num, ncn, pn, ranks, workers, batch = shape
    drop = min(drop, num)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            out = get_partitions('orig', num, ncn, pn, ranks, 1, 1, drop)
        except ValueError:
            return
        for node in range(pn):
            expect = out[node, :, 0, :, 0].T.reshape(-1)  # rank lists interleaved back into the node list
            got = node_positions(num, ncn, pn, ranks, drop, node)
            expect = expect[:len(got)]
            assert got.tolist() == expect.tolist()


def test_rank_pad_uses_samples_near_the_end():
    lists = np.arange(10).reshape(2, 5)
    assert rank_pad(lists, 2).tolist() == [[0, 1, 2, 3, 4, 3], [5, 6, 7, 8, 9, 8]]
    with pytest.warns(UserWarning, match='Attempting to partition'):
        padded = rank_pad(lists, 4)
    assert padded.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2], [5, 6, 7, 8, 9, 5, 6, 7]]


def _full_batches(partition, gbs, count):
    rows = traversal_order(partition).reshape(-1, gbs)[:count]
    return [sorted(row) for row in rows.tolist()]


@pytest.mark.parametrize('num', [405, 10000])
def test_relaxed_resumption(num):
    """GBS 960, NCN 15, 8 ranks: orig-compatible node counts give the same global batches (as sets); on an
    incompatible count, ``relaxed`` replays the initial layout's global-batch sequence exactly, also after a drop."""
    ncn, ranks, workers, gbs = 15, 8, 2, 960
    full = num // gbs  # complete global batches (the tail holds padding that depends on the layout)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for initial in (1, 3, 5, 15):
            start = get_partitions('orig', num, ncn, initial, ranks, workers, gbs // (initial * ranks))
            reference = _full_batches(start, gbs, full)
            initial_rows = traversal_order(start).reshape(-1, gbs)
            for pn in (1, 3, 5, 15):
                relaxed = get_partitions('relaxed', num, ncn, pn, ranks, workers, gbs // (pn * ranks), 0, initial)
                orig = get_partitions('orig', num, ncn, pn, ranks, workers, gbs // (pn * ranks))
                assert (relaxed == orig).all()
                assert _full_batches(relaxed, gbs, full) == reference
            for pn in (2, 4, 6):
                if gbs % (pn * ranks):
                    continue
                with pytest.raises(ValueError, match='evenly divisible'):
                    get_partitions('orig', num, ncn, pn, ranks, workers, gbs // (pn * ranks))
                relaxed = get_partitions('relaxed', num, ncn, pn, ranks, workers, gbs // (pn * ranks), 0, initial)
                assert (traversal_order(relaxed).reshape(-1, gbs) == initial_rows).all()
                for k in range(1, full + 1):
                    resumed = get_partitions('relaxed', num, ncn, pn, ranks, workers, gbs // (pn * ranks), k * gbs,
                                             initial)
                    assert _full_batches(resumed, gbs, full - k) == reference[k:]


def test_relaxed_needs_gbs_divisible_by_the_initial_devices():
    with pytest.raises(ValueError, match='A global batch size of 16 is not evenly divisible by the initial total '
                                         'number of devices of 24'):
        get_partitions('relaxed', 1000, 15, 2, 8, 1, 1, 0, 3)


def _divide_spans_walk(spans, num_samples, num_parts):
    """The reference's loop, as runtime.md 4.2 describes it."""
    spans = list(spans)
    out, supers, index, so_far, begin = [], [], 0, 0, 0
    for part in range(num_parts):
        end = num_samples * (part + 1) // num_parts
        while index < len(spans):
            lo, hi = spans[index]
            if end < so_far + hi - lo:
                if so_far < end:
                    split = end - so_far
                    out.append((lo, lo + split))
                    spans[index] = (lo + split, hi)
                    so_far += split
                break
            out.append((lo, hi))
            index += 1
            so_far += hi - lo
        supers.append((begin, len(out)))
        begin = len(out)
    return out, supers


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=15), st.integers(1, 12), st.randoms(use_true_random=False))
def test_divide_spans_matches_the_walk(sizes, parts, rnd):
    begins = np.cumsum(sizes) - np.array(sizes)
    order = list(range(len(sizes)))
    rnd.shuffle(order)
    spans = [(int(begins[i]), int(begins[i] + sizes[i])) for i in order]
    expect, supers = _divide_spans_walk(spans, sum(sizes), parts)
    got = divide_spans(begins[order], np.array(sizes)[order], sum(sizes), parts)
    assert list(zip(got.begins.tolist(), (got.begins + got.sizes).tolist(), strict=True)) == expect
    assert [tuple(x) for x in zip(got.bounds[:-1].tolist(), got.bounds[1:].tolist(), strict=True)] == supers
