"""Writers and every encoding through ``import streaming``: written with the reference's writer classes, read back
with ``StreamingDataset``, ``LocalDataset`` and ``reader_from_json`` (spec formats.md sections 4 and 7)."""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
import streaming
from PIL import Image
from streaming.base.format import get_index_basename, reader_from_json
from streaming.base.format.json.encodings import is_json_encoded, is_json_encoding
from streaming.base.format.mds.encodings import (
    get_mds_encoded_size,
    get_mds_encodings,
    is_mds_encoding,
    is_mds_encoding_safe,
    mds_decode,
    mds_encode,
)
from streaming.base.format.xsv.encodings import is_xsv_encoding, xsv_decode, xsv_encode

ALL_MDS = {'bytes', 'str', 'int', 'ndarray', 'uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32',
           'int64', 'float16', 'float32', 'float64', 'str_int', 'str_float', 'str_decimal', 'pil', 'jpeg',
           'jpeg_array', 'jpegarray', 'png', 'list[pil]', 'list[jpeg]', 'list[png]', 'pkl', 'json'}


def _jpeg_bytes(color: tuple[int, int, int]) -> bytes:
    import io
    buffer = io.BytesIO()
    Image.new('RGB', (8, 8), color).save(buffer, format='JPEG')
    return buffer.getvalue()


def _sample(i: int) -> dict[str, Any]:
    image = Image.new('RGB', (4, 3), (i, 2 * i, 3 * i))
    return {
        'bytes': bytes([i]) * 3, 'str': f's{i}é', 'int': -i, 'ndarray': np.arange(i + 1, dtype=np.int16),
        'ndarray:float32:2,2': np.full((2, 2), i, np.float32), 'ndarray:uint8': np.array([i, 1], np.uint8),
        'uint8': i, 'uint16': i, 'uint32': i, 'uint64': i, 'int8': -i, 'int16': -i, 'int32': -i, 'int64': -i,
        'float16': 0.5, 'float32': 1.5, 'float64': i / 3, 'str_int': i * 1000, 'str_float': i + 0.25,
        'str_decimal': Decimal(f'{i}.10'), 'pil': image, 'jpeg': image, 'png': image,
        'jpeg_array': [_jpeg_bytes((i, 0, 0))], 'jpegarray': [_jpeg_bytes((0, i, 0))],
        'list[pil]': [image, image], 'list[jpeg]': [image], 'list[png]': [], 'pkl': {'i': i, 't': (1, 2)},
        'json': {'i': i, 'l': [1, None, 'x']},
    }


def _check(sample: dict[str, Any], i: int) -> None:
    want = _sample(i)
    for name in ('bytes', 'str', 'int', 'str_int', 'str_float', 'str_decimal', 'pkl', 'json'):
        assert sample[name] == want[name], name
    for name in ('uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32',
                 'float64'):
        assert sample[name] == np.dtype(name).type(want[name]) and sample[name].dtype == np.dtype(name), name
    for name in ('ndarray', 'ndarray:float32:2,2', 'ndarray:uint8'):
        assert np.array_equal(sample[name], want[name]) and sample[name].dtype == want[name].dtype, name
    assert sample['pil'].tobytes() == want['pil'].tobytes() and sample['pil'].mode == 'RGB'
    assert sample['png'].tobytes() == want['png'].tobytes()
    assert sample['jpeg'].size == (4, 3) and sample['jpeg'].format == 'JPEG'
    assert [im.size for im in sample['jpeg_array']] == [(8, 8)] and len(sample['jpegarray']) == 1
    assert [im.tobytes() for im in sample['list[pil]']] == [want['pil'].tobytes()] * 2
    assert len(sample['list[jpeg]']) == 1 and sample['list[png]'] == []


def test_mds_every_encoding_round_trips(tmp_path: Any) -> None:
    out = str(tmp_path / 'mds')
    columns = {name: name for name in _sample(0)}
    assert {c.split(':')[0] for c in columns} == ALL_MDS
    with streaming.MDSWriter(out=out, columns=columns, size_limit=1 << 12, hashes=['sha1', 'xxh64']) as writer:
        for i in range(12):
            writer.write(_sample(i))
    dataset = streaming.StreamingDataset(local=out, batch_size=4, allow_unsafe_types=True)
    for i in range(12):
        _check(dataset[i], i)
    assert [s['int'] for s in dataset] == [-i for i in range(12)]
    local = streaming.LocalDataset(out, allow_unsafe_types=True)
    _check(local[7], 7)
    with open(os.path.join(out, get_index_basename())) as handle:
        entries = json.load(handle)['shards']
    assert len(entries) > 1
    reader = reader_from_json(out, None, entries[0])
    assert reader.format == 'mds' and reader.hashes == ['sha1', 'xxh64']
    _check(reader[0], 0)
    with pytest.raises(ValueError, match='pkl'):
        reader.validate(allow_unsafe_types=False)
    with pytest.raises(ValueError, match='pkl'):
        streaming.StreamingDataset(local=out)  # unsafe types refused by default


def test_mds_encoding_registry_and_byte_vectors() -> None:
    assert get_mds_encodings() == ALL_MDS
    assert is_mds_encoding('ndarray:int16:2,3') and not is_mds_encoding('') and not is_mds_encoding('pngg')
    assert not is_mds_encoding_safe('pkl') and is_mds_encoding_safe('json')
    assert get_mds_encoded_size('int32') == 4 and get_mds_encoded_size('str') is None
    assert get_mds_encoded_size('ndarray:int16:2,3') == 12
    vectors = [(42, 'uint8', b'*'), (42, 'uint16', b'*\0'), (42, 'int32', b'*\0\0\0'), (42.0, 'float16', b'@Q'),
               (42.0, 'float32', b'\0\0(B'), (42.0, 'float64', b'\0\0\0\0\0\0E@'), (99, 'int', b'c' + b'\0' * 7),
               (Decimal('4E15'), 'str_decimal', b'4E+15'), (-42, 'str_int', b'-42'), (1e16, 'str_float', b'1e+16')]
    for value, encoding, data in vectors:
        assert mds_encode(encoding, value) == data, encoding
    red = Image.new('RGB', (2, 1), (255, 0, 0))
    assert mds_encode('pil', red).hex() == '020000000100000003000000' + b'RGB'.hex() + 'ff0000ff0000'
    assert mds_encode('jpeg_array', [b'abc', b'de']).hex() == '020000000300000002000000' + b'abcde'.hex()
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert mds_encode('ndarray', array)[:4].hex() == '11080203'
    assert mds_encode('ndarray:int16', array)[:3].hex() == '080203'
    assert mds_encode('ndarray:int16:2,3', array) == array.tobytes()
    assert mds_encode('ndarray', np.zeros((300, 1), np.uint8))[:6].hex() == '08092c010100'
    assert np.array_equal(mds_decode('ndarray:int16:2,3', array.tobytes()), array)
    assert mds_encode('bytes', b'pre-encoded') == b'pre-encoded'


def test_ndarray_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match='Attempting to encode a scalar with NDArray encoding'):
        mds_encode('ndarray', np.array(1))
    with pytest.raises(ValueError, match='Attempting to encode a numpy array with 0 elements'):
        mds_encode('ndarray', np.zeros((0,)))
    with pytest.raises(ValueError):
        mds_encode('ndarray:int16', np.zeros(3, np.int32))


def test_json_and_xsv_encodings() -> None:
    assert is_json_encoding('float') and not is_json_encoding('bytes')
    assert is_json_encoded('int', True) and not is_json_encoded('float', 1) and is_json_encoded('str', 'x')
    assert is_xsv_encoding('int') and not is_xsv_encoding('json')
    assert xsv_encode('float', 9.0) == '9.0' and xsv_encode('int', 7) == '7' and xsv_encode('str', 'a') == 'a'
    assert xsv_decode('float', '1.25') == 1.25 and xsv_decode('int', '-3') == -3
    with pytest.raises(ValueError):
        xsv_encode('float', 1)


@pytest.mark.parametrize('writer,kwargs,files', [
    ('JSONWriter', {}, ('.json', '.json.meta')),
    ('CSVWriter', {}, ('.csv', '.csv.meta')),
    ('TSVWriter', {'newline': '\r\n'}, ('.tsv', '.tsv.meta')),
    ('XSVWriter', {'separator': '||'}, ('.xsv', '.xsv.meta')),
])
def test_split_writers_round_trip(tmp_path: Any, writer: str, kwargs: dict[str, Any], files: tuple[str, str]) -> None:
    out = str(tmp_path / writer)
    columns = {'name': 'str', 'count': 'int', 'score': 'float'}
    rows = [{'name': f'n{i}', 'count': i, 'score': i / 4} for i in range(30)]
    with getattr(streaming, writer)(out=out, columns=columns, size_limit=200, compression='zstd:7',
                                    hashes=['md5'], **kwargs) as w:
        for row in rows:
            w.write(row)
    names = sorted(os.listdir(out))
    assert f'shard.00000{files[0]}.zstd' in names and f'shard.00000{files[1]}.zstd' in names
    dataset = streaming.StreamingDataset(remote=out, local=str(tmp_path / 'cache'), batch_size=5,
                                         validate_hash='md5')
    assert [dataset[i] for i in range(30)] == rows
    assert sorted(s['count'] for s in dataset) == list(range(30))


def test_writer_arguments(tmp_path: Any) -> None:
    with pytest.raises(ValueError, match=r'Invalid Writer argument\(s\)'):
        streaming.MDSWriter(out=str(tmp_path / 'a'), columns={'x': 'int'}, bogus=1)
    with pytest.raises(ValueError, match='size_limit'):
        streaming.MDSWriter(out=str(tmp_path / 'a'), columns={'x': 'int'}, size_limit=2 ** 32)
    with pytest.raises(TypeError, match='unsupported'):
        streaming.MDSWriter(out=str(tmp_path / 'a'), columns={'x': 'nope'})
    writer = streaming.XSVWriter(out=str(tmp_path / 'b'), columns={'x': 'int'}, separator='|', size_limit='1kb')
    config = writer.get_config()
    writer.finish()
    assert (config['format'], config['separator'], config['size_limit'], config['version']) == ('xsv', '|', 1024, 2)
    out = str(tmp_path / 'c')
    for value in (1, 2):
        with streaming.MDSWriter(out=out, columns={'x': 'int'}, exist_ok=True) as w:
            w.write({'x': value})
    assert sorted(os.listdir(out)) == ['index.json', 'shard.00000.mds']
    assert streaming.LocalDataset(out)[0] == {'x': 2}
