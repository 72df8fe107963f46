"""The MDS shard format: byte-exact shards and indexes (spec 1.3, 2.2, 2.3), strict reading, hostile input, and
hypothesis round trips of every encoding through writer and reader."""

from __future__ import annotations

import json
import os
import struct
import tempfile
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.errors import (
    IndexFormatError,
    ShardCorruptError,
    UnknownNameError,
    UnsafePathError,
    UnsafeTypeError,
)
from streaming_core.machinery.lookup import get_registry
from streaming_core.reading.index_file import load_index, shard_readers
from streaming_core.storage.compression import decompress
from streaming_mds import MDSWriter

SAMPLES = [{'words': 'one', 'number': 1, 'x': 1.5}, {'words': 'twenty', 'number': -20, 'x': 2.0},
           {'words': '', 'number': 300, 'x': 0.0}]
COLUMNS = {'words': 'str', 'number': 'int', 'x': 'float32'}
CONFIG_286 = (b'{"column_encodings": ["int", "str", "float32"], "column_names": ["number", "words", "x"], '
              b'"column_sizes": [8, null, 4], "compression": null, "format": "mds", "hashes": [], '
              b'"size_limit": 67108864, "version": 2}')


def write(out: str, samples: list[dict[str, Any]], **kwargs: Any) -> str:
    kwargs.setdefault('columns', COLUMNS)
    with MDSWriter(out=out, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return out


def read_dataset(root: str, allow_unsafe_types: bool = False) -> list[dict[str, Any]]:
    """Every sample of a local dataset through our readers (compressed parts decompressed to a scratch dir)."""
    index_path = os.path.join(root, 'index.json')
    samples = []
    with tempfile.TemporaryDirectory() as scratch:
        for reader in shard_readers(load_index(index_path), index_path, allow_unsafe_types=allow_unsafe_types):
            paths = []
            for raw, zipped in reader.parts:
                path = os.path.join(root, raw.basename)
                if not os.path.exists(path):
                    with open(os.path.join(root, zipped.basename), 'rb') as handle:
                        data = decompress(reader.compression, handle.read(), raw.bytes)
                    path = os.path.join(scratch, raw.basename.replace('/', '_'))
                    with open(path, 'wb') as handle:
                        handle.write(data)
                paths.append(path)
            with reader.open(paths) as view:
                samples.extend(view[i] for i in range(len(view)))
    return samples


def entry_of(root: str, shard: int = 0) -> dict[str, Any]:
    with open(os.path.join(root, 'index.json')) as handle:
        return json.load(handle)['shards'][shard]


def mds_reader(entry: dict[str, Any], **kwargs: Any) -> Any:
    return get_registry('format').get('mds').reader(entry, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Byte-exact output


def test_286_byte_shard_hexdump(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES)
    data = (tmp_path / 'ds' / 'shard.00000.mds').read_bytes()
    expected = (bytes.fromhex('03000000' 'e5000000' 'f8000000' '0e010000' '1e010000') + CONFIG_286
                + bytes.fromhex('03000000' '0100000000000000') + b'one' + bytes.fromhex('0000c03f')
                + bytes.fromhex('06000000' 'ecffffffffffffff') + b'twenty' + bytes.fromhex('00000040')
                + bytes.fromhex('00000000' '2c01000000000000') + bytes.fromhex('00000000'))
    assert len(CONFIG_286) == 209
    assert data == expected and len(data) == 286
    assert sorted(os.listdir(root)) == ['index.json', 'shard.00000.mds']


def test_default_index_text(tmp_path: Any) -> None:
    write(str(tmp_path / 'ds'), SAMPLES)
    text = (tmp_path / 'ds' / 'index.json').read_text()
    assert text == ('{"shards": [{"column_encodings": ["int", "str", "float32"], "column_names": ["number", "words", '
                    '"x"], "column_sizes": [8, null, 4], "compression": null, "format": "mds", "hashes": [], '
                    '"raw_data": {"basename": "shard.00000.mds", "bytes": 286, "hashes": {}}, "samples": 3, '
                    '"size_limit": 67108864, "version": 2, "zip_data": null}], "version": 2}')


def test_zstd7_hashed_index_text(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES, compression='zstd:7', hashes=['sha1', 'xxh3_64'], size_limit='1kb')
    index = json.loads((tmp_path / 'ds' / 'index.json').read_text())
    entry = index['shards'][0]
    assert entry['raw_data'] == {'basename': 'shard.00000.mds', 'bytes': 303, 'hashes': {
        'sha1': '372418b9828dca53c1e2294cc9639c3aebc9e81e', 'xxh3_64': '05b356953c12929b'}}
    assert entry['zip_data']['basename'] == 'shard.00000.mds.zstd'
    zipped = (tmp_path / 'ds' / 'shard.00000.mds.zstd').read_bytes()
    assert entry['zip_data']['bytes'] == len(zipped)
    assert len(decompress('zstd', zipped)) == 303
    assert {k: v for k, v in entry.items() if k not in ('raw_data', 'zip_data')} == {
        'column_encodings': ['int', 'str', 'float32'], 'column_names': ['number', 'words', 'x'],
        'column_sizes': [8, None, 4], 'compression': 'zstd:7', 'format': 'mds', 'hashes': ['sha1', 'xxh3_64'],
        'samples': 3, 'size_limit': 1024, 'version': 2}
    assert sorted(os.listdir(root)) == ['index.json', 'shard.00000.mds.zstd']
    assert (tmp_path / 'ds' / 'index.json').read_text().startswith('{"shards": [{"column_encodings"')
    assert read_dataset(root) == [{**s, 'x': np.float32(s['x'])} for s in SAMPLES]


def test_fixed_size_columns_have_no_head(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), [{'n': 1, 'v': np.array([1.0, 2.0], np.float32)}],
                 columns={'n': 'int', 'v': 'ndarray:float32:2'})
    entry = entry_of(root)
    assert entry['column_sizes'] == [8, 8]
    with mds_reader(entry).open([os.path.join(root, 'shard.00000.mds')]) as view:
        assert view.get_raw(0) == bytes.fromhex('0100000000000000' '0000803f00000040')
        assert view[0]['v'].tolist() == [1.0, 2.0]


def test_empty_writer_writes_empty_index(tmp_path: Any) -> None:
    write(str(tmp_path / 'ds'), [])
    assert (tmp_path / 'ds' / 'index.json').read_text() == '{"shards": [], "version": 2}'


# ---------------------------------------------------------------------------------------------------------------
# Reading


def test_view_returns_bytes_and_plain_values(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), [{'id': i, 'data': bytes([i]) * 256} for i in range(5)],
                 columns={'id': 'int', 'data': 'bytes'})
    with mds_reader(entry_of(root)).open([os.path.join(root, 'shard.00000.mds')]) as view:
        assert len(view) == 5
        sample = view[3]
        assert sample == {'data': b'\x03' * 256, 'id': 3}
        assert type(sample['data']) is bytes and type(sample['id']) is int
        for bad in (-1, 5):
            with pytest.raises(IndexError):
                view[bad]


def test_reader_is_picklable_and_exposes_parts(tmp_path: Any) -> None:
    import pickle
    root = write(str(tmp_path / 'ds'), SAMPLES, compression='zstd')
    reader = pickle.loads(pickle.dumps(mds_reader(entry_of(root))))
    (raw, zipped), = reader.parts
    assert (raw.basename, zipped.basename, reader.compression, reader.samples) == \
        ('shard.00000.mds', 'shard.00000.mds.zstd', 'zstd', 3)


def test_pkl_refused_unless_allowed(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), [{'obj': {'a': (1, 2)}}], columns={'obj': 'pkl'})
    with pytest.raises(UnsafeTypeError) as info:
        read_dataset(root)
    assert 'Column obj contains an unsafe type: pkl. To proceed anyway, set ``allow_unsafe_types=True``.' in \
        str(info.value)
    assert isinstance(info.value, ValueError)
    assert read_dataset(root, allow_unsafe_types=True) == [{'obj': {'a': (1, 2)}}]


# ---------------------------------------------------------------------------------------------------------------
# Hostile input


@pytest.fixture
def shard(tmp_path: Any) -> tuple[dict[str, Any], str]:
    root = write(str(tmp_path / 'ds'), SAMPLES)
    return entry_of(root), os.path.join(root, 'shard.00000.mds')


def _rewrite(path: str, data: bytes) -> None:
    with open(path, 'wb') as handle:
        handle.write(data)


def test_truncated_shard(shard: tuple[dict[str, Any], str]) -> None:
    entry, path = shard
    data = open(path, 'rb').read()
    _rewrite(path, data[:-3])
    with pytest.raises(ShardCorruptError, match='shard.00000.mds'):
        mds_reader(entry).open([path])
    entry['raw_data']['bytes'] = len(data) - 3  # the index agrees with the truncated file: offsets catch it
    with pytest.raises(ShardCorruptError, match='past the end'):
        mds_reader(entry).open([path])
    _rewrite(path, data[:6])
    entry['raw_data']['bytes'] = 6
    with pytest.raises(IndexFormatError, match='3 samples cannot fit in 6 bytes'):
        mds_reader(entry)  # the entry itself is impossible: refused before the file is opened
    entry['samples'] = 1
    with pytest.raises(ShardCorruptError, match='fewer than'):
        mds_reader(entry).open([path])


@pytest.mark.parametrize('patch,match', [
    (lambda d: struct.pack('<I', 4) + d[4:], 'counts 4 samples'),
    (lambda d: d[:16] + struct.pack('<I', 10**6) + d[20:], 'past the end'),
    (lambda d: d[:8] + struct.pack('<I', 1) + d[12:], 'decrease'),
    (lambda d: d[:4] + struct.pack('<I', 8) + d[8:], 'first sample offset'),
])
def test_bad_headers(shard: tuple[dict[str, Any], str], patch: Any, match: str) -> None:
    entry, path = shard
    _rewrite(path, patch(open(path, 'rb').read()))
    with pytest.raises(ShardCorruptError, match=match):
        mds_reader(entry).open([path])


def test_corrupt_sample_head(shard: tuple[dict[str, Any], str]) -> None:
    entry, path = shard
    data = bytearray(open(path, 'rb').read())
    data[229] = 9  # sample 0 claims 9 bytes of text instead of 3
    _rewrite(path, bytes(data))
    with mds_reader(entry).open([path]) as view:
        with pytest.raises(ShardCorruptError, match='column sizes'):
            view[0]
        assert view[1]['words'] == 'twenty'


@pytest.mark.parametrize('mutate,error', [
    (lambda e: e.update(extra=1), IndexFormatError),
    (lambda e: e.pop('column_sizes'), IndexFormatError),
    (lambda e: e.update(version=3), IndexFormatError),
    (lambda e: e.update(version=True), IndexFormatError),
    (lambda e: e.update(samples=-1), IndexFormatError),
    (lambda e: e.update(samples='3'), IndexFormatError),
    (lambda e: e['raw_data'].update(basename='../shard.00000.mds'), UnsafePathError),
    (lambda e: e['raw_data'].update(basename='/etc/passwd'), UnsafePathError),
    (lambda e: e['raw_data'].update(basename='a/../../x'), UnsafePathError),
    (lambda e: e.update(compression='zstd'), IndexFormatError),
    (lambda e: e.update(zip_data={'basename': 'x.zstd', 'bytes': 1, 'hashes': {}}), IndexFormatError),
    (lambda e: e.update(column_sizes=[8, None]), IndexFormatError),
    (lambda e: e.update(column_sizes=[8, 5, 4]), IndexFormatError),
    (lambda e: e.update(column_encodings=['int', 'str:x', 'float32']), IndexFormatError),
    (lambda e: e.update(column_names=['a', 'a', 'b']), IndexFormatError),
    (lambda e: e.update(column_encodings=['int', 'rot13', 'float32']), UnknownNameError),
    (lambda e: e.update(format='json'), IndexFormatError),
])
def test_malformed_entries(shard: tuple[dict[str, Any], str], mutate: Any, error: type) -> None:
    entry, _ = shard
    mutate(entry)
    with pytest.raises(error):
        mds_reader(entry, where='ds/index.json shard 0')


def test_bad_index_version_through_load(tmp_path: Any) -> None:
    from streaming_core.reading.index_file import parse_index_text
    with pytest.raises(IndexFormatError, match='Unsupported streaming data version'):
        parse_index_text('{"shards": [], "version": 1}', 'x/index.json')


def test_zero_size_treated_as_variable_like_the_reference(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES)
    entry = entry_of(root)
    entry['column_sizes'] = [8, 0, 4]
    with mds_reader(entry).open([os.path.join(root, 'shard.00000.mds')]) as view:
        assert view[1]['words'] == 'twenty'


# ---------------------------------------------------------------------------------------------------------------
# Third-party codecs


def test_third_party_codec_round_trip(tmp_path: Any) -> None:
    import codecs

    from streaming_core.hookspecs import hookimpl
    from streaming_core.machinery.discovery import register_plugin, unregister_plugin
    from streaming_mds.resolve import clear_codec_cache

    class Rot13:
        size = None
        unsafe = False

        def __init__(self, args: str | None = None) -> None:
            self.times = int(args or 1)

        def encode(self, obj: str) -> bytes:
            return codecs.encode(obj, 'rot13').encode()

        def decode(self, data: bytes) -> str:
            return codecs.decode(bytes(data).decode(), 'rot13')

    class Plugin:
        @hookimpl
        def register_codecs(self, registry: Any) -> None:
            registry.add('rot13', Rot13)

    register_plugin(Plugin(), name='test-rot13')
    try:
        root = write(str(tmp_path / 'ds'), [{'t': 'hello'}], columns={'t': 'rot13:2'})
        assert b'uryyb' in (tmp_path / 'ds' / 'shard.00000.mds').read_bytes()
        assert read_dataset(root) == [{'t': 'hello'}]
    finally:
        unregister_plugin('test-rot13')
        clear_codec_cache()


# ---------------------------------------------------------------------------------------------------------------
# Hypothesis: every encoding through writer and reader, every compression


ALL_COLUMNS = {'b': 'bytes', 's': 'str', 'i': 'int', 'u8': 'uint8', 'u16': 'uint16', 'u32': 'uint32',
               'u64': 'uint64', 'i8': 'int8', 'i16': 'int16', 'i32': 'int32', 'i64': 'int64', 'f16': 'float16',
               'f32': 'float32', 'f64': 'float64', 'si': 'str_int', 'sf': 'str_float', 'sd': 'str_decimal',
               'js': 'json', 'pk': 'pkl', 'nd': 'ndarray', 'ndt': 'ndarray:int16', 'nds': 'ndarray:uint8:2,3',
               'im': 'pil', 'png': 'png', 'ims': 'list[pil]'}
COMPRESSIONS = [None, 'zstd', 'zstd:1', 'br:1', 'snappy', 'lz4', 'lz4:9', 'gz:1', 'bz2:1']


def _int_of(dtype: str) -> st.SearchStrategy[int]:
    info = np.iinfo(dtype)
    return st.integers(int(info.min), int(info.max))


def _image(seed: int) -> Any:
    from PIL import Image
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (2, 3, 3), dtype=np.uint8))


SAMPLE = st.fixed_dictionaries({
    'b': st.binary(max_size=64), 's': st.text(max_size=20), 'i': _int_of('int64'), 'u8': _int_of('uint8'),
    'u16': _int_of('uint16'), 'u32': _int_of('uint32'), 'u64': _int_of('uint64'), 'i8': _int_of('int8'),
    'i16': _int_of('int16'), 'i32': _int_of('int32'), 'i64': _int_of('int64'),
    'f16': st.floats(width=16, allow_nan=False), 'f32': st.floats(width=32, allow_nan=False),
    'f64': st.floats(allow_nan=False), 'si': st.integers(), 'sf': st.floats(allow_nan=False),
    'sd': st.decimals(allow_nan=False, allow_infinity=False),
    'js': st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3),
    'pk': st.tuples(st.integers(), st.text(max_size=4)),
    'nd': st.integers(1, 5).map(lambda n: np.arange(n, dtype=np.float32)),
    'ndt': st.integers(1, 5).map(lambda n: np.arange(n * 2, dtype=np.int16).reshape(n, 2)),
    'nds': st.integers(0, 200).map(lambda v: np.full((2, 3), v, np.uint8)),
    'im': st.integers(0, 1000).map(_image), 'png': st.integers(0, 1000).map(_image),
    'ims': st.lists(st.integers(0, 1000).map(_image), max_size=2),
})


def _expected(sample: dict[str, Any], name: str) -> Any:
    value = sample[name]
    encoding = ALL_COLUMNS[name]
    if encoding in ('uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32',
                    'float64'):
        return np.dtype(encoding).type(value)
    return value


def _equal(got: Any, want: Any) -> bool:
    if isinstance(want, np.ndarray):
        return isinstance(got, np.ndarray) and got.dtype == want.dtype and (got == want).all()
    if hasattr(want, 'tobytes') and hasattr(want, 'mode'):
        return got.mode == want.mode and got.convert(want.mode).tobytes() == want.tobytes()
    if isinstance(want, list):
        return len(got) == len(want) and all(_equal(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, Decimal):
        return str(got) == str(want)
    return got == want and type(got) is type(want)


@settings(max_examples=25, deadline=None)
@given(st.lists(SAMPLE, min_size=1, max_size=6), st.sampled_from(COMPRESSIONS), st.sampled_from([None, 1500]))
def test_every_encoding_round_trips_through_shards(samples: list[dict[str, Any]], compression: str | None,
                                                    size_limit: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write(os.path.join(tmp, 'ds'), samples, columns=ALL_COLUMNS, compression=compression,
                     size_limit=size_limit, hashes=['xxh64'])
        back = read_dataset(root, allow_unsafe_types=True)
    assert len(back) == len(samples)
    for got, sample in zip(back, samples, strict=True):
        assert set(got) == set(ALL_COLUMNS)
        for name in ALL_COLUMNS:
            assert _equal(got[name], _expected(sample, name)), (name, got[name], sample[name])


# ---------------------------------------------------------------------------------------------------------------
# The compiled sample encoder falls back to the precise errors


def test_compiled_encoder_errors(tmp_path: Any) -> None:
    from streaming_core.errors import CodecError
    from streaming_core.writing.writer import MissingColumnError
    from streaming_mds.encodings import EncodingOverflowError, EncodingTypeError
    writer = MDSWriter(columns={'i': 'int', 's': 'str', 'b': 'bytes', 'a': 'ndarray:uint8:2'},
                       out=str(tmp_path / 'ds'))
    good = {'i': 1, 's': 'x', 'b': b'y', 'a': np.zeros(2, np.uint8)}
    assert writer.encode_sample(good) == writer._encode_sample_checked(good)
    cases = [({'i': 1 << 64}, EncodingOverflowError), ({'i': 1.5}, EncodingTypeError), ({'s': '\ud800'}, CodecError),
             ({'b': 'text'}, EncodingTypeError), ({'a': np.zeros(3, np.uint8)}, CodecError),
             ({'a': b'abc'}, CodecError), ({'i': True}, None), ({'i': np.int64(-5)}, None),
             ({'a': np.zeros(2, '>u1')}, None), ({'s': b'raw'}, None)]
    for patch, error in cases:
        sample = {**good, **patch}
        if error is None:
            assert writer.encode_sample(sample) == writer._encode_sample_checked(sample)
        else:
            with pytest.raises(error):
                writer.encode_sample(sample)
    with pytest.raises(MissingColumnError):
        writer.encode_sample({'i': 1})
    with pytest.raises(TypeError, match='dict'):
        writer.encode_sample([1, 2])
    writer.finish()
