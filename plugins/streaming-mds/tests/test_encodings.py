"""MDS encodings: the byte vectors of spec 4.1 and 4.2, errors, the registry, and hypothesis round trips."""

from __future__ import annotations

import math
import pickle
import struct
from decimal import Decimal
from io import BytesIO
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from streaming_core.errors import CodecError, UnknownNameError
from streaming_mds import get_codec, get_mds_encoded_size, get_mds_encodings, is_mds_encoding, mds_decode, mds_encode
from streaming_mds.encodings import EncodingOverflowError, EncodingTypeError

PIL = pytest.importorskip('PIL')
from PIL import Image  # noqa: E402

REFERENCE_ENCODINGS = {'bytes', 'str', 'int', 'ndarray', 'uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16',
                       'int32', 'int64', 'float16', 'float32', 'float64', 'str_int', 'str_float', 'str_decimal',
                       'pil', 'jpeg', 'jpeg_array', 'jpegarray', 'png', 'list[pil]', 'list[jpeg]', 'list[png]', 'pkl',
                       'json'}
DTYPES = ['uint8', 'int8', 'uint16', 'int16', 'float16', 'uint32', 'int32', 'float32', 'uint64', 'int64', 'float64']


def test_registry_has_exactly_the_reference_encodings() -> None:
    assert REFERENCE_ENCODINGS <= get_mds_encodings()
    from streaming_core.machinery.lookup import get_registry
    ours = {name for name in get_registry('codec').names() if get_registry('codec').origin(name) == 'mds'}
    assert ours == REFERENCE_ENCODINGS


@pytest.mark.parametrize('value,encoding,expected', [
    (42, 'uint8', b'*'),
    (42, 'uint16', b'*\0'),
    (42, 'int32', b'*\0\0\0'),
    (42.0, 'float16', b'@Q'),
    (42.0, 'float32', b'\0\0(B'),
    (42.0, 'float64', b'\0\0\0\0\0\0E@'),
    (99, 'int', b'c\0\0\0\0\0\0\0'),
    (-42, 'str_int', b'-42'),
    (42.0, 'str_float', b'42.0'),
    (1e16, 'str_float', b'1e+16'),
    (float('nan'), 'str_float', b'nan'),
    (float('inf'), 'str_float', b'inf'),
    (Decimal('4E15'), 'str_decimal', b'4E+15'),
    (Decimal('1.10'), 'str_decimal', b'1.10'),
    ('caf\u00e9', 'str', 'caf\u00e9'.encode()),
    (5, 'pkl', bytes.fromhex('80044b052e')),
    ([b'abc', b'de'], 'jpeg_array', bytes.fromhex('02000000' '03000000' '02000000') + b'abcde'),
    ([b'abc', b'de'], 'jpegarray', bytes.fromhex('02000000' '03000000' '02000000') + b'abcde'),
    ({'b': [1, None], 'a': 1.5}, 'json', b'{"b": [1, null], "a": 1.5}'),
    (np.arange(3, dtype=np.int64), 'json', b'[0, 1, 2]'),
])
def test_byte_vectors(value: Any, encoding: str, expected: bytes) -> None:
    assert mds_encode(encoding, value) == expected


def test_pil_vector_and_round_trip() -> None:
    image = Image.new('RGB', (2, 1), (255, 0, 0))
    data = mds_encode('pil', image)
    assert data == bytes.fromhex('02000000' '01000000' '03000000') + b'RGB' + bytes.fromhex('ff0000ff0000')
    back = mds_decode('pil', data)
    assert back.mode == 'RGB' and back.size == (2, 1) and back.tobytes() == image.tobytes()


def test_fixed_sizes() -> None:
    sizes = {'int': 8, 'uint8': 1, 'uint16': 2, 'uint32': 4, 'uint64': 8, 'int8': 1, 'int16': 2, 'int32': 4,
             'int64': 8, 'float16': 2, 'float32': 4, 'float64': 8, 'ndarray:int16:2,3': 12,
             'ndarray:float64:4': 32}
    for encoding, size in sizes.items():
        assert get_mds_encoded_size(encoding) == size, encoding
    for encoding in ('bytes', 'str', 'str_int', 'pil', 'jpeg', 'png', 'pkl', 'json', 'ndarray', 'ndarray:uint8',
                     'jpeg_array', 'list[pil]'):
        assert get_mds_encoded_size(encoding) is None, encoding


def test_decoded_types() -> None:
    assert type(mds_decode('int', mds_encode('int', 7))) is int
    assert type(mds_decode('uint16', mds_encode('uint16', 7))) is np.uint16
    assert type(mds_decode('float32', mds_encode('float32', 1.5))) is np.float32
    assert mds_decode('str_decimal', b'1.10') == Decimal('1.10')
    assert type(mds_decode('bytes', memoryview(b'ab'))) is bytes


def test_bytes_values_bypass_every_encoding() -> None:
    for encoding in ('str', 'int', 'pkl', 'json', 'ndarray', 'png'):
        assert mds_encode(encoding, b'\x01\x02') == b'\x01\x02'


# ---------------------------------------------------------------------------------------------------------------
# ndarray (spec 4.2)


ARRAY = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int16)


def test_ndarray_vectors() -> None:
    values = ARRAY.tobytes()
    assert mds_encode('ndarray', ARRAY) == bytes.fromhex('11080203') + values
    assert mds_encode('ndarray:int16', ARRAY) == bytes.fromhex('080203') + values
    assert mds_encode('ndarray:int16:2,3', ARRAY) == values
    assert get_mds_encoded_size('ndarray:int16:2,3') == 12
    assert mds_encode('ndarray', np.zeros((300, 1), np.uint8))[:6] == bytes.fromhex('08092c010100')
    assert mds_encode('ndarray:', ARRAY) == mds_encode('ndarray', ARRAY)
    for encoding in ('ndarray', 'ndarray:int16', 'ndarray:int16:2,3'):
        back = mds_decode(encoding, mds_encode(encoding, ARRAY))
        assert back.dtype == np.int16 and back.shape == (2, 3) and (back == ARRAY).all()
        assert back.flags.writeable and back.base is None  # a fresh array: torch collates it without a warning


def test_ndarray_shape_integer_types() -> None:
    for biggest, kind in ((255, 0), (256, 1), (65535, 1), (65536, 2)):
        data = mds_encode('ndarray', np.zeros((biggest, 1), np.uint8))
        assert data[1] == (2 << 2) | kind
    from streaming_mds.ndarray import _shape_header
    assert _shape_header((1 << 32, 1)) == bytes(((2 << 2) | 3,)) + struct.pack('<2Q', 1 << 32, 1)


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('shape', [(1,), (7,), (3, 4), (1, 1, 1), (2, 3, 4), (300, 2), (65536, 7, 1)])
def test_ndarray_forms_lengths(dtype: str, shape: tuple[int, ...]) -> None:
    array = (np.arange(math.prod(shape)) % 100).astype(dtype).reshape(shape)
    static = mds_encode(f'ndarray:{dtype}:{",".join(map(str, shape))}', array)
    dtype_only = mds_encode(f'ndarray:{dtype}', array)
    dynamic = mds_encode('ndarray', array)
    assert len(static) < len(dtype_only) < len(dynamic)
    assert len(static) == math.prod(shape) * np.dtype(dtype).itemsize
    for encoding, data in ((f'ndarray:{dtype}:{",".join(map(str, shape))}', static),
                           (f'ndarray:{dtype}', dtype_only), ('ndarray', dynamic)):
        back = mds_decode(encoding, data)
        assert back.dtype == np.dtype(dtype) and back.shape == shape and (back == array).all()


def test_ndarray_big_endian_is_written_little_endian() -> None:
    big = np.array([1, 256, -2], dtype='>i4')
    data = mds_encode('ndarray', big)
    assert data[:3] == bytes((33, 1 << 2, 3)) and data[3:] == np.array([1, 256, -2], '<i4').tobytes()
    assert mds_decode('ndarray', data).tolist() == [1, 256, -2]
    assert mds_decode('ndarray:int32:3', mds_encode('ndarray:int32:3', big)).tolist() == [1, 256, -2]


def test_ndarray_non_contiguous_is_c_order() -> None:
    array = np.arange(6, dtype=np.uint8).reshape(2, 3).T
    assert mds_decode('ndarray', mds_encode('ndarray', array)).tolist() == array.tolist()


@pytest.mark.parametrize('value,encoding,match', [
    (np.array(5), 'ndarray', 'scalar'),
    (np.zeros((0, 3)), 'ndarray', '0 elements'),
    (np.array([True]), 'ndarray', 'dtype'),
    (np.array([1j]), 'ndarray', 'dtype'),
    (np.zeros(3, np.int32), 'ndarray:int16', 'Wrong dtype'),
    (np.zeros(4, np.int16), 'ndarray:int16:3', 'Wrong shape'),
])
def test_ndarray_errors(value: np.ndarray, encoding: str, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        mds_encode(encoding, value)


def test_ndarray_decode_rejects_corrupt_data() -> None:
    data = mds_encode('ndarray', ARRAY)
    for bad in (b'', b'\x07' + data[1:], data[:3], data[:-1], data + b'\0'):
        with pytest.raises(CodecError):
            mds_decode('ndarray', bad)


# ---------------------------------------------------------------------------------------------------------------
# Resolution and type errors


@pytest.mark.parametrize('encoding,error', [
    ('str:x', CodecError), ('int:3', CodecError), ('ndarray:bool', CodecError), ('ndarray:int8:0', CodecError),
    ('ndarray:int8:2,x', CodecError), ('foo:bar', UnknownNameError), ('pngg', UnknownNameError), ('', CodecError),
])
def test_malformed_encoding_strings(encoding: str, error: type) -> None:
    with pytest.raises(error):
        get_codec(encoding)
    assert not is_mds_encoding(encoding)


def test_unknown_encoding_names_installed_ones() -> None:
    with pytest.raises(UnknownNameError, match='Installed column encoding names'):
        get_codec('rot13')
    assert not is_mds_encoding(None)


@pytest.mark.parametrize('encoding,value', [
    ('bytes', 'text'), ('str', 5), ('int', 1.5), ('int', '5'), ('str_int', 1.5), ('str_float', 1),
    ('str_decimal', 1.5), ('pil', 'x'), ('jpeg', 5), ('png', [1]), ('jpeg_array', 5),
    ('jpeg_array', [5]), ('list[pil]', (1,)), ('ndarray', [1, 2]),
])
def test_wrong_types_raise_type_errors(encoding: str, value: Any) -> None:
    with pytest.raises(EncodingTypeError):
        mds_encode(encoding, value)


def test_overflow() -> None:
    with pytest.raises(EncodingOverflowError):
        mds_encode('int', 1 << 63)
    with pytest.raises(EncodingOverflowError):
        mds_encode('uint8', 256)
    with pytest.raises(EncodingOverflowError):
        mds_encode('int8', -129)
    assert mds_encode('int', np.int64(-1)) == b'\xff' * 8


def test_json_rejects_unserialisable() -> None:
    with pytest.raises(CodecError):
        mds_encode('json', {'x': object()})


def test_pkl_is_unsafe_others_are_safe() -> None:
    assert get_codec('pkl').unsafe
    assert not any(get_codec(name).unsafe for name in REFERENCE_ENCODINGS - {'pkl'})


# ---------------------------------------------------------------------------------------------------------------
# Images


def _jpeg_bytes(color: tuple[int, int, int]) -> bytes:
    out = BytesIO()
    Image.new('RGB', (8, 8), color).save(out, format='JPEG')
    return out.getvalue()


@pytest.mark.parametrize('mode', ['I', 'L', 'RGB'])
def test_pil_lossless(mode: str) -> None:
    image = Image.fromarray((np.arange(12) * 7).astype('int32' if mode == 'I' else 'uint8').reshape(3, 4)) \
        if mode != 'RGB' else Image.fromarray(np.arange(36, dtype=np.uint8).reshape(3, 4, 3))
    if mode == 'L':
        image = image.convert('L')
    back = mds_decode('pil', mds_encode('pil', image))
    assert back.mode == image.mode and back.tobytes() == image.tobytes()
    if mode != 'I':
        png = mds_decode('png', mds_encode('png', image))
        assert png.tobytes() == image.tobytes()


def test_jpeg_from_file_is_verbatim(tmp_path: Any) -> None:
    path = tmp_path / 'a.jpg'
    data = _jpeg_bytes((10, 20, 30))
    path.write_bytes(data)
    with Image.open(path) as image:
        assert mds_encode('jpeg', image) == data
    decoded = mds_decode('jpeg', data)
    assert decoded.format == 'JPEG' and decoded.size == (8, 8)
    fresh = mds_encode('jpeg', Image.new('RGB', (4, 4)))
    assert fresh[:2] == b'\xff\xd8'
    with pytest.raises(CodecError):
        mds_encode('jpeg', Image.new('RGBA', (4, 4)))


def test_jpeg_array_round_trip_and_errors() -> None:
    parts = [_jpeg_bytes((255, 0, 0)), _jpeg_bytes((0, 0, 255))]
    images = mds_decode('jpeg_array', mds_encode('jpeg_array', parts))
    assert [im.size for im in images] == [(8, 8), (8, 8)]
    with pytest.raises(CodecError, match='0 images'):
        mds_decode('jpeg_array', mds_encode('jpeg_array', []))
    data = mds_encode('jpeg_array', parts)
    with pytest.raises(CodecError):
        mds_decode('jpeg_array', data[:-5])


@pytest.mark.parametrize('element', ['pil', 'png', 'jpeg'])
def test_image_lists(element: str) -> None:
    images = [Image.new('RGB', (3, 2), (i * 40, 0, 0)) for i in range(3)]
    data = mds_encode(f'list[{element}]', images)
    assert data[:4] == b'\0\0\0\0' and struct.unpack_from('<I', data, 4)[0] == 3
    back = mds_decode(f'list[{element}]', data)
    assert len(back) == 3 and all(im.size == (3, 2) for im in back)
    if element != 'jpeg':
        assert [im.convert('RGB').tobytes() for im in back] == [im.tobytes() for im in images]
    assert mds_decode(f'list[{element}]', mds_encode(f'list[{element}]', [])) == []


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis round trips


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


SCALAR_BOUNDS = {name: (np.iinfo(name).min, np.iinfo(name).max) for name in DTYPES if name[0] in 'ui'}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_scalar_round_trips(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(DTYPES))
    if name in SCALAR_BOUNDS:
        low, high = SCALAR_BOUNDS[name]
        value = data.draw(st.integers(int(low), int(high)))
        assert mds_decode(name, mds_encode(name, value)) == np.dtype(name).type(value)
    else:
        value = data.draw(st.floats(width=int(name[5:]), allow_nan=True))
        encoded = mds_encode(name, value)
        assert encoded == np.dtype(name).type(value).tobytes()
        assert mds_decode(name, encoded).tobytes() == encoded


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=300), st.text(max_size=60), st.integers(-(1 << 63), (1 << 63) - 1), st.integers(),
       st.floats(), st.decimals(allow_nan=False, allow_infinity=False))
def test_simple_round_trips(raw: bytes, text: str, small: int, big: int, real: float, dec: Decimal) -> None:
    assert mds_decode('bytes', mds_encode('bytes', raw)) == raw
    assert mds_decode('str', mds_encode('str', text)) == text
    assert mds_decode('int', mds_encode('int', small)) == small
    assert mds_decode('str_int', mds_encode('str_int', big)) == big
    assert _same(mds_decode('str_float', mds_encode('str_float', real)), real)
    assert str(mds_decode('str_decimal', mds_encode('str_decimal', dec))) == str(dec)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(JSON_VALUES)
def test_json_and_pkl_round_trips(value: Any) -> None:
    assert mds_decode('json', mds_encode('json', value)) == value
    assert mds_decode('pkl', mds_encode('pkl', value)) == value
    assert mds_encode('pkl', value) == pickle.dumps(value)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(dtype=st.sampled_from([np.dtype(d) for d in DTYPES] + [np.dtype('>i4'), np.dtype('>f8')]),
                  shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6)))
def test_ndarray_round_trips(array: np.ndarray) -> None:
    name = array.dtype.name
    shape = ','.join(map(str, array.shape))
    for encoding in ('ndarray', f'ndarray:{name}', f'ndarray:{name}:{shape}'):
        back = mds_decode(encoding, mds_encode(encoding, array))
        assert back.dtype == array.dtype.newbyteorder('=') and back.shape == array.shape
        assert back.tobytes() == array.astype(array.dtype.newbyteorder('<')).tobytes()


IMAGES = st.builds(
    lambda mode, w, h, seed: Image.fromarray(
        np.random.default_rng(seed).integers(0, 255, (h, w, 3) if mode == 'RGB' else (h, w), dtype=np.uint8), mode),
    st.sampled_from(['L', 'RGB']), st.integers(1, 9), st.integers(1, 9), st.integers(0, 1 << 30))


@settings(max_examples=25, deadline=None)
@given(st.lists(IMAGES, max_size=3))
def test_image_round_trips(images: list[Any]) -> None:
    for image in images:
        for encoding in ('pil', 'png'):
            back = mds_decode(encoding, mds_encode(encoding, image))
            assert back.mode == image.mode and back.tobytes() == image.tobytes()
        assert mds_decode('jpeg', mds_encode('jpeg', image)).size == image.size
    back = mds_decode('list[png]', mds_encode('list[png]', images))
    assert [im.tobytes() for im in back] == [im.tobytes() for im in images]
    if images:
        jpegs = [mds_encode('jpeg', im) for im in images]
        assert [im.size for im in mds_decode('jpeg_array', mds_encode('jpeg_array', jpegs))] == \
            [im.size for im in images]
