"""Numbers in the numpy scalar columns (``uint8`` ... ``float64``) either read back equal or are refused: numpy
integers and bools get the range check Python ints get, floats are not truncated, and finite floats do not become
infinities."""

from __future__ import annotations

import math
import tempfile
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core import StreamingDataset
from streaming_core.errors import CodecError
from streaming_mds import MDSWriter
from streaming_mds.encodings import SCALAR_TYPES, EncodingOverflowError, EncodingTypeError

INT_TYPES = [name for name in SCALAR_TYPES if not name.startswith('float')]


def read_back(out: str) -> list[dict[str, Any]]:
    dataset = StreamingDataset(local=out, shuffle=False, batch_size=1)
    return [dataset[i] for i in range(dataset.num_samples)]


def write_each(out: str, encoding: str, values: list[Any]) -> list[Any]:
    """Write ``{'x': value}`` for each value; return, per value, the error type it raised or ``None``."""
    raised = []
    with MDSWriter(out=out, columns={'x': encoding}) as writer:
        for value in values:
            try:
                writer.write({'x': value})
            except CodecError as err:
                raised.append(type(err))
            else:
                raised.append(None)
    return raised


@pytest.mark.parametrize('encoding,value', [
    ('uint8', np.int64(300)), ('uint8', np.int64(-1)), ('int32', np.int64(2 ** 40)), ('uint16', np.uint32(70000)),
    ('int8', np.uint8(200)), ('int64', np.uint64(2 ** 63)), ('uint64', np.int64(-1)), ('uint8', np.float64(300.0)),
    ('uint8', np.array([300])), ('float16', 70000.0), ('float16', np.float64(1e6)), ('float32', 1e40),
    ('float32', np.float64(-1e39)), ('float16', 1 << 20), ('uint8', float('inf')),
])
def test_out_of_range_numbers_are_refused(tmp_path: Any, encoding: str, value: Any) -> None:
    out = str(tmp_path / 'ds')
    assert write_each(out, encoding, [1, value, 2]) == [None, EncodingOverflowError, None]
    assert [sample['x'] for sample in read_back(out)] == [1, 2]


@pytest.mark.parametrize('encoding,value', [
    ('uint8', 3.7), ('int32', np.float32(0.5)), ('int64', np.float64(-2.25)), ('uint8', float('nan')),
    ('int16', np.array([1.5])),
])
def test_non_integral_floats_in_integer_columns_are_refused(tmp_path: Any, encoding: str, value: Any) -> None:
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'x': encoding}) as writer:
        with pytest.raises(EncodingTypeError, match=f"Column 'x' is declared '{encoding}'"):
            writer.write({'x': value})
        writer.write({'x': 3})
    assert [sample['x'] for sample in read_back(out)] == [3]


def test_representable_numbers_read_back_equal(tmp_path: Any) -> None:
    columns = {'u8': 'uint8', 'i8': 'int8', 'u16': 'uint16', 'i32': 'int32', 'u64': 'uint64', 'i64': 'int64',
               'f16': 'float16', 'f32': 'float32', 'f64': 'float64'}
    samples = [
        {'u8': np.int64(255), 'i8': np.int64(-128), 'u16': np.uint32(65535), 'i32': np.int64(-2 ** 31),
         'u64': np.uint64(2 ** 64 - 1), 'i64': np.uint64(2 ** 63 - 1), 'f16': 65504.0, 'f32': np.float64(3.4e38),
         'f64': np.float32(0.1)},
        {'u8': np.bool_(True), 'i8': True, 'u16': np.float64(7.0), 'i32': 12.0, 'u64': 0, 'i64': np.int8(-5),
         'f16': np.float32(-0.0), 'f32': float('inf'), 'f64': float('-inf')},
        {'u8': np.array([9]), 'i8': '5', 'u16': [3], 'i32': np.int32(7), 'u64': np.uint8(1), 'i64': -1,
         'f16': 3, 'f32': np.int64(1 << 40), 'f64': 1e308},
    ]
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns=columns) as writer:
        for sample in samples:
            writer.write(sample)
    got = read_back(out)
    assert len(got) == len(samples)
    for wrote, read in zip(samples, got, strict=True):
        for name, encoding in columns.items():
            assert type(read[name]) is np.dtype(encoding).type
            value = wrote[name]
            expected = float(value) if encoding.startswith('float') else int(np.asarray(value).item())
            assert read[name] == np.dtype(encoding).type(expected), (name, value, read[name])


@pytest.mark.parametrize('encoding', ['float16', 'float32', 'float64'])
def test_nan_and_infinities_are_stored(tmp_path: Any, encoding: str) -> None:
    out = str(tmp_path / 'ds')
    assert write_each(out, encoding, [float('nan'), float('inf'), np.float64('-inf')]) == [None] * 3
    got = [sample['x'] for sample in read_back(out)]
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize('encoding,array', [
    ('ndarray:uint8', np.array([300])), ('ndarray:uint8:2', np.array([1, 300])),
    ('ndarray:float16:1', np.array([1e6])), ('ndarray:int8', np.array([1, 2], np.uint8)),
])
def test_ndarray_columns_refuse_other_dtypes(tmp_path: Any, encoding: str, array: np.ndarray) -> None:
    with MDSWriter(out=str(tmp_path / 'ds'), columns={'x': encoding}) as writer:
        with pytest.raises(CodecError, match='Wrong dtype'):
            writer.write({'x': array})


NUMPY_INTS = st.sampled_from(INT_TYPES).flatmap(
    lambda name: st.integers(int(np.iinfo(name).min), int(np.iinfo(name).max)).map(np.dtype(name).type))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(INT_TYPES), st.lists(NUMPY_INTS, min_size=1, max_size=8))
def test_numpy_integers_read_back_equal_or_are_refused(encoding: str, values: list[Any]) -> None:
    info = np.iinfo(encoding)
    with tempfile.TemporaryDirectory() as tmp:
        raised = write_each(f'{tmp}/ds', encoding, [*values, 0])
        fits = [info.min <= int(value) <= info.max for value in values]
        assert raised[:-1] == [None if fit else EncodingOverflowError for fit in fits]
        assert [int(sample['x']) for sample in read_back(f'{tmp}/ds')] == \
            [int(value) for value, fit in zip(values, fits, strict=True) if fit] + [0]


def test_what_the_references_numpy_constructor_takes_is_kept(tmp_path: Any) -> None:
    """As ``np.float32(None)`` and ``np.int64(np.datetime64(...))`` in mosaicml-streaming 0.13: ``None`` in a float
    column is NaN, and a datetime or duration in an integer column is its count of units."""
    out = str(tmp_path / 'ds')
    with MDSWriter(out=out, columns={'f': 'float32', 'h': 'float16', 'd': 'int64', 't': 'int64'}) as writer:
        writer.write({'f': None, 'h': None, 'd': np.datetime64('2020-01-02'), 't': np.timedelta64(5, 's')})
    (row,) = read_back(out)
    assert math.isnan(row['f']) and math.isnan(row['h'])
    assert (int(row['d']), int(row['t'])) == (int(np.datetime64('2020-01-02').astype(np.int64)), 5)
    with pytest.raises(CodecError):
        with MDSWriter(out=str(tmp_path / 'int'), columns={'i': 'int64'}) as writer:
            writer.write({'i': None})
