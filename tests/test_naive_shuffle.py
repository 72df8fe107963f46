"""The builtin ``naive`` shuffle and the numpy primitives every shuffle relies on (runtime.md 4.1, 4.3, 4.9)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.builtin.naive import naive_shuffle
from streaming_core.machinery.lookup import get_registry

SIZES = [7, 3, 10, 1, 5, 9, 4]
NAIVE = [6, 2, 26, 22, 7, 15, 32, 3, 21, 16, 18, 25, 0, 30, 10, 37, 23, 8, 5, 24, 36, 34, 27, 1, 11, 9, 20, 19, 33,
         13, 29, 17, 14, 38, 12, 28, 35, 31, 4]


def test_numpy_primitives_match_the_spec_vectors():
    assert np.random.default_rng(9176).permutation(10).tolist() == [8, 1, 2, 7, 5, 6, 9, 3, 0, 4]
    bits = np.random.default_rng(0).bit_generator.random_raw(2).tolist()
    assert bits == [11749869230777074271, 4976686463289251617]


def test_naive_vector():
    assert naive_shuffle(np.array(SIZES), 2, 9176, 0, 8).tolist() == NAIVE


def test_naive_is_registered_as_builtin():
    registry = get_registry('shuffle')
    assert registry.get('naive') is naive_shuffle
    assert registry.origin('naive') == 'builtin.naive'


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=20), st.integers(1, 4), st.integers(0, 2**40),
       st.integers(0, 5))
def test_naive_is_a_permutation_of_seed_plus_epoch(sizes, ncn, seed, epoch):
    out = naive_shuffle(np.array(sizes), ncn, seed, epoch, 8)
    assert out.dtype == np.int64
    assert sorted(out.tolist()) == list(range(sum(sizes)))
    assert out.tolist() == np.random.default_rng(seed + epoch).permutation(sum(sizes)).tolist()
