"""The exact value forms both sides compare by (no reference needed)."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pytest

from compat import tagged

pytestmark = pytest.mark.compat  # the compat suite: its serial pass (Makefile)


def _same(a: object, b: object) -> bool:
    return tagged.canonical(tagged.encode(a)) == tagged.canonical(tagged.encode(b))


def test_types_that_compare_equal_in_python_stay_distinct() -> None:
    """``1``, ``1.0``, ``True``, ``np.int64(1)`` and ``np.uint8(1)`` are all different samples."""
    values = [1, 1.0, True, np.int64(1), np.uint8(1), np.float32(1), Decimal('1'), '1', b'1']
    for i, a in enumerate(values):
        for b in values[i + 1:]:
            assert not _same(a, b), (a, b)


def test_round_trip_of_every_kind() -> None:
    """decode(encode(x)) encodes to the same form, for every kind a sample may hold."""
    from PIL import Image
    image = Image.frombytes('RGB', (2, 1), b'\xff\x00\x00\x00\xff\x00')
    sample = {'i': -5, 'f': 2.5, 'nan': float('nan'), 'inf': float('-inf'), 'b': b'\x00\xff', 's': 'h\u00e9',
              'd': Decimal('4E+15'), 'arr': np.arange(6, dtype=np.int16).reshape(2, 3), 'scalar': np.float16(1.5),
              'img': image, 'tup': (1, (2,)), 'list': [None, True], 'keys': {1: 'a', (2, 3): 'b'},
              'tagged-looking': {'__t': 'bytes'}}
    encoded = tagged.encode(sample)
    again = tagged.encode(tagged.decode(encoded))
    assert tagged.canonical(again) == tagged.canonical(encoded)
    assert tagged.first_difference(again, encoded) is None


def test_arrays_compare_by_dtype_shape_and_bytes() -> None:
    """Same values in another dtype or shape differ; C order is what counts, not memory layout."""
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert _same(a, np.ascontiguousarray(a))
    assert _same(a.T, np.ascontiguousarray(a.T))
    assert not _same(a, a.astype(np.int64))
    assert not _same(a, a.reshape(3, 2))
    assert _same(a.astype('>i4'), a)


def test_first_difference_names_the_path() -> None:
    """A mismatch report points at the differing key."""
    a, b = tagged.encode({'x': [1, 2], 'y': 'a'}), tagged.encode({'x': [1, 3], 'y': 'a'})
    assert tagged.first_difference(a, b) == '/x[1]: 2 != 3'


def test_unsupported_values_are_refused() -> None:
    """A value with no exact form raises instead of comparing loosely."""
    with pytest.raises(TypeError):
        tagged.encode({1, 2})
