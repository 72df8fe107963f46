"""The writer inputs of the golden datasets (deterministic: fixed seeds, no clock).

Each definition is ``{'name', 'writer', 'kwargs', 'inputs'}`` (``writer`` is the reference class name, ``kwargs``
the keyword arguments besides ``out``), or for a merged index ``{'name', 'writer': 'merge_index', 'partitions':
[{'dir', 'writer', 'kwargs', 'inputs'}, ...]}``. :mod:`compat.make_golden` writes them with the reference and
stores the inputs, encoded with :mod:`compat.tagged`, in the manifest, so our side never re-runs this module.
"""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import numpy as np

__all__ = ['definitions', 'HASHES_ALL', 'COMPRESSIONS']

#: Every hash algorithm the reference supports, in the sorted order its writers require.
HASHES_ALL = sorted(['md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'sha3_224', 'sha3_256', 'sha3_384',
                     'sha3_512', 'blake2b', 'blake2s', 'xxh32', 'xxh64', 'xxh128', 'xxh3_64', 'xxh3_128'])

#: One MDS dataset per entry: every family at its default level and at a chosen level.
COMPRESSIONS = ['br', 'br:1', 'bz2', 'bz2:1', 'gz', 'gz:0', 'snappy', 'zstd', 'zstd:1', 'zstd:22']

_NDARRAY_DTYPES = ['uint8', 'int8', 'uint16', 'int16', 'float16', 'uint32', 'int32', 'float32', 'uint64', 'int64',
                   'float64']


def _image(rng: np.random.Generator, mode: str, size: tuple[int, int] = (7, 5)) -> Any:
    from PIL import Image
    w, h = size
    if mode in ('RGB', 'RGBA', 'L', 'LA', 'CMYK'):
        bands = len(mode)
        data = rng.integers(0, 256, size=(h, w, bands), dtype=np.uint8)
        return Image.frombytes(mode, size, data.tobytes())
    if mode == '1':
        return Image.frombytes('L', size, rng.integers(0, 256, size=(h, w), dtype=np.uint8).tobytes()).convert('1')
    if mode == 'I':
        return Image.frombytes('I', size, rng.integers(-2**31, 2**31, size=(h, w), dtype='<i4').tobytes())
    if mode == 'I;16':
        return Image.frombytes('I;16', size, rng.integers(0, 2**16, size=(h, w), dtype='<u2').tobytes())
    if mode == 'F':
        return Image.frombytes('F', size, rng.standard_normal((h, w)).astype('<f4').tobytes())
    raise ValueError(mode)


def _jpeg_bytes(image: Any, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format='JPEG', quality=quality)
    return buf.getvalue()


def _scalars() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    columns = {'b': 'bytes', 's': 'str', 'i': 'int', 'u8': 'uint8', 'u16': 'uint16', 'u32': 'uint32',
               'u64': 'uint64', 'i8': 'int8', 'i16': 'int16', 'i32': 'int32', 'i64': 'int64', 'f16': 'float16',
               'f32': 'float32', 'f64': 'float64', 'si': 'str_int', 'sf': 'str_float', 'sd': 'str_decimal'}
    texts = ['', 'hello', 'h\u00e9llo w\u00f6rld', '\U0001f642 emoji', 'line\nbreak\ttab', 'x' * 40, '"quoted"',
             '\u4e2d\u6587', 'a,b|c', '\\backslash']
    ints = [0, 1, -1, 2**63 - 1, -2**63, 42, True, 123456789012, -7, 99]
    floats = [0.0, -0.0, 1.5, 1e16, float('inf'), float('-inf'), float('nan'), 3.141592653589793, 1e-300, -2.5]
    decimals = [Decimal('4E15'), Decimal('1.10'), Decimal('-0.0001'), Decimal('0'), Decimal('123456789.987654321'),
                Decimal('NaN'), Decimal('-Infinity'), Decimal('1E-7'), Decimal('42'), Decimal('-3.50')]
    inputs = []
    for k in range(10):
        inputs.append({
            'b': rng.integers(0, 256, size=k * 3, dtype=np.uint8).tobytes(),
            's': texts[k],
            'i': ints[k],
            'u8': [0, 255, 42, 7, 128, 1, 2, 3, 4, 5][k],
            'u16': [0, 65535, 42, 300, 1, 2, 3, 4, 5, 6][k],
            'u32': [0, 2**32 - 1, 42, 70000, 1, 2, 3, 4, 5, 6][k],
            'u64': [0, 2**64 - 1, 42, 2**40, 1, 2, 3, 4, 5, 6][k],
            'i8': [0, -128, 127, -1, 1, 2, 3, 4, 5, 6][k],
            'i16': [0, -32768, 32767, -1, 1, 2, 3, 4, 5, 6][k],
            'i32': [0, -2**31, 2**31 - 1, -1, 1, 2, 3, 4, 5, np.int32(6)][k],
            'i64': [0, -2**63, 2**63 - 1, -1, 1, 2, 3, 4, 5, 6][k],
            'f16': [0.0, 42.0, -1.5, 65504.0, float('inf'), 0.1, 2.0, 3.0, 4.0, 5.0][k],
            'f32': [0.0, 42.0, -1.5, 1e30, float('nan'), 0.1, 2.0, 3.0, 4.0, np.float32(5.25)][k],
            'f64': floats[k],
            'si': ints[k] if not isinstance(ints[k], bool) else 12,
            'sf': floats[k],
            'sd': decimals[k],
        })
    return {'name': 'mds_scalars', 'writer': 'MDSWriter', 'kwargs': {'columns': columns}, 'inputs': inputs}


def _ndarrays() -> dict[str, Any]:
    rng = np.random.default_rng(2)
    columns = {'dyn': 'ndarray', 'dt': 'ndarray:int16', 'st': 'ndarray:float32:2,3', 'st1': 'ndarray:uint8:5'}
    shapes = [(3,), (2, 3), (300, 1), (1, 1, 1), (4, 2, 2), (70,), (1,), (2, 1, 3, 1), (5,), (3, 3), (2, 2)]
    inputs = []
    for k, dtype in enumerate(_NDARRAY_DTYPES):
        shape = shapes[k]
        if dtype.startswith('float'):
            dyn = rng.standard_normal(shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            dyn = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        if k == 9:  # a non-contiguous view: written in C order
            dyn = np.arange(6, dtype=dtype).reshape(2, 3).T
        inputs.append({
            'dyn': dyn,
            'dt': rng.integers(-2**15, 2**15, size=[(2,), (1, 4), (3, 1, 2)][k % 3], dtype=np.int16),
            'st': rng.standard_normal((2, 3)).astype(np.float32),
            'st1': rng.integers(0, 256, size=5, dtype=np.uint8),
        })
    return {'name': 'mds_ndarray', 'writer': 'MDSWriter', 'kwargs': {'columns': columns}, 'inputs': inputs}


def _images() -> dict[str, Any]:
    rng = np.random.default_rng(3)
    columns = {'pil': 'pil', 'jpg': 'jpeg', 'png': 'png', 'ja': 'jpeg_array', 'jb': 'jpegarray', 'lp': 'list[pil]',
               'lj': 'list[jpeg]', 'lpng': 'list[png]'}
    pil_modes = ['L', 'RGB', 'RGBA', 'I', 'F', '1', 'I;16', 'CMYK']
    jpeg_modes = ['RGB', 'L', 'CMYK', 'RGB', 'L', 'RGB', 'RGB', 'L']
    png_modes = ['RGBA', 'L', 'RGB', 'I;16', 'LA', '1', 'RGB', 'L']
    inputs = []
    for k in range(8):
        inputs.append({
            'pil': _image(rng, pil_modes[k], (3 + k, 2 + k % 3)),
            'jpg': _image(rng, jpeg_modes[k], (8, 8)),
            'png': _image(rng, png_modes[k], (5, 4)),
            'ja': [_jpeg_bytes(_image(rng, 'RGB', (4, 4))) for _ in range(1 + k % 3)],
            'jb': [_jpeg_bytes(_image(rng, 'L', (3, 5)), quality=50 + k)],
            'lp': [_image(rng, m, (2, 3)) for m in ['RGB', 'L', 'I'][:k % 4]],
            'lj': [_image(rng, 'RGB', (4, 3)) for _ in range(k % 3)],
            'lpng': [_image(rng, m, (3, 2)) for m in ['RGBA', 'L'][:k % 3]],
        })
    return {'name': 'mds_images', 'writer': 'MDSWriter', 'kwargs': {'columns': columns}, 'inputs': inputs}


def _objects() -> dict[str, Any]:
    rng = np.random.default_rng(4)
    columns = {'pk': 'pkl', 'js': 'json', 'n': 'int'}
    pickles = [{'a': (1, 2), 'b': [1.5, None], 'c': b'raw'}, (1, 'two', 3.0), [], 'text', {1: 'int key', (2, 3): 4},
               ((1,), (2, (3,))), Decimal('2.50'), None]
    jsons = [{'k': 'v', 'n': [1, 2, {'x': None}]}, [1.5, 'caf\u00e9', True, None], 'plain string', 12345,
             {'z': 1, 'a': 2, '\u00fc': '\U0001f600'}, np.arange(6, dtype=np.int64).reshape(2, 3),
             {'float': 1e16, 'neg': -0.0}, rng.standard_normal(3).round(3)]
    inputs = [{'pk': p, 'js': j, 'n': k} for k, (p, j) in enumerate(zip(pickles, jsons, strict=True))]
    return {'name': 'mds_objects', 'writer': 'MDSWriter', 'kwargs': {'columns': columns}, 'inputs': inputs}


def _small_rows(seed: int, count: int, text_len: int = 12) -> list[dict[str, Any]]:
    """Rows ``{id:int, txt:str, v:float32[4]}`` for the sharding, compression and hashing datasets."""
    rng = np.random.default_rng(seed)
    letters = np.array(list('abcdefghijklmnopqrstuvwxyz \u00e9'))
    rows = []
    for k in range(count):
        text = ''.join(rng.choice(letters, size=int(rng.integers(0, text_len))))
        rows.append({'id': k, 'txt': text, 'v': rng.standard_normal(4).astype(np.float32)})
    return rows


_SMALL_COLUMNS = {'id': 'int', 'txt': 'str', 'v': 'ndarray:float32:4'}


def _text_rows(seed: int, count: int) -> list[dict[str, Any]]:
    """Rows ``{s:str, i:int, f:float}`` safe for every split format (no separators or newlines in values)."""
    rng = np.random.default_rng(seed)
    words = ['alpha', 'beta', '', 'gamma delta', 'caf\u00e9', '\u4e2d\u6587', 'x' * 20, 'quote"d', "it's", 'end']
    floats = [0.0, -0.0, 1.25, 9.0, 1e16, -2.5e-8, float('inf'), float('nan'), 3.141592653589793, 1e300]
    rows = []
    for k in range(count):
        rows.append({'s': words[k % len(words)], 'i': int(rng.integers(-10**12, 10**12)) if k % 4 else k - 5,
                     'f': floats[k % len(floats)] if k % 3 else float(rng.standard_normal())})
    return rows


_TEXT_COLUMNS = {'s': 'str', 'i': 'int', 'f': 'float'}


def _split_formats() -> list[dict[str, Any]]:
    defs = []
    json_rows = _text_rows(10, 12)
    for k, row in enumerate(json_rows):
        if k % 5 == 0:
            row['extra'] = 'dropped by the writer'
        if k == 3:
            row['i'] = True
    defs.append({'name': 'json_basic', 'writer': 'JSONWriter', 'kwargs': {'columns': _TEXT_COLUMNS},
                 'inputs': json_rows})
    defs.append({'name': 'json_crlf_multishard', 'writer': 'JSONWriter',
                 'kwargs': {'columns': _TEXT_COLUMNS, 'newline': '\r\n', 'size_limit': 200},
                 'inputs': _text_rows(11, 25)})
    defs.append({'name': 'json_br_hashed', 'writer': 'JSONWriter',
                 'kwargs': {'columns': _TEXT_COLUMNS, 'compression': 'br:5', 'hashes': ['sha256', 'xxh3_64'],
                            'size_limit': 300},
                 'inputs': _text_rows(12, 20)})
    defs.append({'name': 'csv_basic', 'writer': 'CSVWriter', 'kwargs': {'columns': _TEXT_COLUMNS},
                 'inputs': [r for r in _text_rows(13, 12)]})
    defs.append({'name': 'csv_snappy_multishard', 'writer': 'CSVWriter',
                 'kwargs': {'columns': _TEXT_COLUMNS, 'compression': 'snappy', 'size_limit': '150b',
                            'hashes': ['md5']},
                 'inputs': _text_rows(14, 24)})
    defs.append({'name': 'tsv_basic', 'writer': 'TSVWriter', 'kwargs': {'columns': _TEXT_COLUMNS,
                                                                         'newline': '\r\n'},
                 'inputs': _text_rows(15, 12)})
    defs.append({'name': 'tsv_bz2', 'writer': 'TSVWriter',
                 'kwargs': {'columns': _TEXT_COLUMNS, 'compression': 'bz2:3', 'size_limit': 256},
                 'inputs': _text_rows(16, 16)})
    defs.append({'name': 'xsv_pipe', 'writer': 'XSVWriter', 'kwargs': {'columns': _TEXT_COLUMNS, 'separator': '|'},
                 'inputs': _text_rows(17, 12)})
    defs.append({'name': 'xsv_multichar_gz', 'writer': 'XSVWriter',
                 'kwargs': {'columns': _TEXT_COLUMNS, 'separator': '::', 'newline': '\r\n', 'compression': 'gz:1',
                            'size_limit': 220, 'hashes': ['blake2s', 'sha1']},
                 'inputs': _text_rows(18, 16)})
    return defs


def definitions() -> list[dict[str, Any]]:
    """Every golden dataset definition, in manifest order."""
    defs = [_scalars(), _ndarrays(), _images(), _objects()]
    defs.append({'name': 'mds_multishard', 'writer': 'MDSWriter',
                 'kwargs': {'columns': _SMALL_COLUMNS, 'size_limit': 400, 'hashes': ['sha1', 'xxh64']},
                 'inputs': _small_rows(20, 40)})
    big_first = _small_rows(21, 10)
    big_first[0]['txt'] = 'o' * 500
    big_first[6]['txt'] = 'p' * 600
    defs.append({'name': 'mds_empty_first_shard', 'writer': 'MDSWriter',
                 'kwargs': {'columns': _SMALL_COLUMNS, 'size_limit': '400b'}, 'inputs': big_first})
    defs.append({'name': 'mds_hashes_all', 'writer': 'MDSWriter',
                 'kwargs': {'columns': _SMALL_COLUMNS, 'hashes': HASHES_ALL}, 'inputs': _small_rows(22, 6)})
    defs.append({'name': 'mds_zstd7_hashed', 'writer': 'MDSWriter',
                 'kwargs': {'columns': _SMALL_COLUMNS, 'compression': 'zstd:7', 'hashes': ['md5', 'xxh3_64'],
                            'size_limit': '1kb'},
                 'inputs': _small_rows(23, 30)})
    defs.append({'name': 'mds_no_size_limit', 'writer': 'MDSWriter',
                 'kwargs': {'columns': _SMALL_COLUMNS, 'size_limit': None}, 'inputs': _small_rows(24, 5)})
    for k, compression in enumerate(COMPRESSIONS):
        defs.append({'name': 'mds_' + compression.replace(':', '_'), 'writer': 'MDSWriter',
                     'kwargs': {'columns': _SMALL_COLUMNS, 'compression': compression, 'size_limit': 500},
                     'inputs': _small_rows(30 + k, 20)})
    defs.extend(_split_formats())
    defs.append({'name': 'merged', 'writer': 'merge_index', 'partitions': [
        {'dir': '0', 'writer': 'MDSWriter', 'kwargs': {'columns': _SMALL_COLUMNS, 'size_limit': 300},
         'inputs': _small_rows(40, 9)},
        {'dir': '1', 'writer': 'MDSWriter', 'kwargs': {'columns': _SMALL_COLUMNS, 'compression': 'zstd'},
         'inputs': _small_rows(41, 5)},
        {'dir': '10', 'writer': 'MDSWriter',
         'kwargs': {'columns': _SMALL_COLUMNS, 'compression': 'br:3', 'hashes': ['sha1']},
         'inputs': _small_rows(42, 4)},
        {'dir': '2', 'writer': 'MDSWriter', 'kwargs': {'columns': _SMALL_COLUMNS}, 'inputs': _small_rows(43, 3)},
    ]})
    return defs
