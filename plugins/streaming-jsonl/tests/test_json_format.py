"""The JSON-lines format: the spec 1.3/3.1 bytes, reading (NaN, custom newlines), hostile input, round trips."""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.errors import CodecError, IndexFormatError, ShardCorruptError, UnsafePathError
from streaming_core.machinery.lookup import get_registry
from streaming_core.storage.compression import decompress
from streaming_jsonl import JSONWriter

SAMPLES = [{'words': 'one', 'number': 1, 'x': 1.5}, {'words': 'twenty', 'number': -20, 'x': 2.0},
           {'words': '', 'number': 300, 'x': 0.0}]
COLUMNS = {'words': 'str', 'number': 'int', 'x': 'float'}
CONFIG_GZ = ('{"columns": {"number": "int", "words": "str", "x": "float"}, "compression": "gz", "format": "json", '
             '"hashes": ["md5"], "newline": "\\n", "size_limit": 67108864, "version": 2}')


def write(out: str, samples: list[dict[str, Any]], **kwargs: Any) -> str:
    kwargs.setdefault('columns', COLUMNS)
    with JSONWriter(out=out, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return out


def entry_of(root: str, shard: int = 0) -> dict[str, Any]:
    with open(os.path.join(root, 'index.json')) as handle:
        return json.load(handle)['shards'][shard]


def open_view(root: str, entry: dict[str, Any], scratch: str) -> Any:
    reader = get_registry('format').get('json').reader(entry)
    paths = []
    for raw, zipped in reader.parts:
        path = os.path.join(root, raw.basename)
        if not os.path.exists(path):
            with open(os.path.join(root, zipped.basename), 'rb') as handle:
                data = decompress(reader.compression, handle.read(), raw.bytes)
            path = os.path.join(scratch, raw.basename)
            with open(path, 'wb') as handle:
                handle.write(data)
        paths.append(path)
    return reader.open(paths)


def read_all(root: str) -> list[dict[str, Any]]:
    with open(os.path.join(root, 'index.json')) as handle:
        entries = json.load(handle)['shards']
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for entry in entries:
            with open_view(root, entry, scratch) as view:
                out.extend(view[i] for i in range(len(view)))
    return out


def test_spec_bytes_with_gz_and_md5(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES, compression='gz', hashes=['md5'])
    entry = entry_of(root)
    assert entry['raw_data'] == {'basename': 'shard.00000.json', 'bytes': 124,
                                 'hashes': {'md5': '5997f30659b17e2880e44a495d925791'}}
    assert entry['raw_meta'] == {'basename': 'shard.00000.json.meta', 'bytes': 193,
                                 'hashes': {'md5': '5cca5417965a49c12d5eb99df452d872'}}
    assert entry['zip_data']['basename'] == 'shard.00000.json.gz'
    assert entry['zip_meta']['basename'] == 'shard.00000.json.meta.gz'
    assert {k: v for k, v in entry.items() if not k.endswith(('_data', '_meta'))} == {
        'columns': {'number': 'int', 'words': 'str', 'x': 'float'}, 'compression': 'gz', 'format': 'json',
        'hashes': ['md5'], 'newline': '\n', 'samples': 3, 'size_limit': 67108864, 'version': 2}
    data = decompress('gz', (tmp_path / 'ds' / 'shard.00000.json.gz').read_bytes())
    assert data == (b'{"number": 1, "words": "one", "x": 1.5}\n{"number": -20, "words": "twenty", "x": 2.0}\n'
                    b'{"number": 300, "words": "", "x": 0.0}\n')
    meta = decompress('gz', (tmp_path / 'ds' / 'shard.00000.json.meta.gz').read_bytes())
    assert meta == bytes.fromhex('03000000' '00000000' '28000000' '55000000' '7c000000') + CONFIG_GZ.encode()
    assert sorted(os.listdir(root)) == ['index.json', 'shard.00000.json.gz', 'shard.00000.json.meta.gz']


def test_uncompressed_index_text(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES)
    text = (tmp_path / 'ds' / 'index.json').read_text()
    assert text == ('{"shards": [{"columns": {"number": "int", "words": "str", "x": "float"}, "compression": null, '
                    '"format": "json", "hashes": [], "newline": "\\n", "raw_data": {"basename": "shard.00000.json", '
                    '"bytes": 124, "hashes": {}}, "raw_meta": {"basename": "shard.00000.json.meta", "bytes": 188, '
                    '"hashes": {}}, "samples": 3, "size_limit": 67108864, "version": 2, "zip_data": null, '
                    '"zip_meta": null}], "version": 2}')
    assert read_all(root) == SAMPLES


def test_extra_keys_dropped_and_non_ascii_escaped(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), [{'words': 'caf\u00e9 \U0001F600', 'number': 1, 'x': 1.0, 'extra': 5}])
    line = (tmp_path / 'ds' / 'shard.00000.json').read_bytes()
    assert line == b'{"number": 1, "words": "caf\\u00e9 \\ud83d\\ude00", "x": 1.0}\n'
    assert read_all(root) == [{'words': 'caf\u00e9 \U0001F600', 'number': 1, 'x': 1.0}]


def test_nan_and_infinity(tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), [{'words': 'a', 'number': 1, 'x': math.nan},
                                        {'words': 'b', 'number': 2, 'x': -math.inf}])
    assert b'NaN' in (tmp_path / 'ds' / 'shard.00000.json').read_bytes()
    back = read_all(root)
    assert math.isnan(back[0]['x']) and back[1]['x'] == -math.inf


@pytest.mark.parametrize('newline', ['\r\n', '|||', '\n\n'])
def test_custom_newlines(newline: str, tmp_path: Any) -> None:
    root = write(str(tmp_path / 'ds'), SAMPLES, newline=newline, size_limit=90)
    assert entry_of(root)['newline'] == newline
    assert read_all(root) == SAMPLES


def test_writer_validation(tmp_path: Any) -> None:
    with pytest.raises(CodecError, match='JSON format takes'):
        JSONWriter(columns={'a': 'bytes'}, out=str(tmp_path / 'a'))
    with pytest.raises(ValueError, match='newline'):
        JSONWriter(columns=COLUMNS, newline='', out=str(tmp_path / 'b'))
    writer = JSONWriter(columns={'a': 'str'}, out=str(tmp_path / 'c'))
    with pytest.raises(CodecError):
        writer.write({'a': b'bytes'})
    with pytest.raises(CodecError, match='an int is not a float'):
        JSONWriter(columns={'x': 'float'}, out=str(tmp_path / 'd')).write({'x': 1})


# ---------------------------------------------------------------------------------------------------------------
# Hostile input


@pytest.fixture
def shard(tmp_path: Any) -> tuple[str, dict[str, Any]]:
    root = write(str(tmp_path / 'ds'), SAMPLES)
    return root, entry_of(root)


def test_meta_count_mismatch(shard: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    root, entry = shard
    meta = tmp_path / 'ds' / 'shard.00000.json.meta'
    meta.write_bytes(struct.pack('<I', 2) + meta.read_bytes()[4:])
    with pytest.raises(ShardCorruptError, match='counts 2 samples'):
        open_view(root, entry, str(tmp_path))


@pytest.mark.parametrize('offset_index,value,match', [(0, 4, 'first sample offset'), (3, 1000, 'past the end'),
                                                      (2, 1, 'decrease')])
def test_bad_offsets(shard: tuple[str, dict[str, Any]], tmp_path: Any, offset_index: int, value: int,
                     match: str) -> None:
    root, entry = shard
    meta = tmp_path / 'ds' / 'shard.00000.json.meta'
    data = bytearray(meta.read_bytes())
    data[4 + 4 * offset_index:8 + 4 * offset_index] = struct.pack('<I', value)
    meta.write_bytes(bytes(data))
    with pytest.raises(ShardCorruptError, match=match):
        open_view(root, entry, str(tmp_path))


def test_truncated_data(shard: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    root, entry = shard
    path = tmp_path / 'ds' / 'shard.00000.json'
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ShardCorruptError, match='shard.00000.json'):
        open_view(root, entry, str(tmp_path))
    entry['raw_data']['bytes'] -= 1
    with pytest.raises(ShardCorruptError, match='past the end'):
        open_view(root, entry, str(tmp_path))


def test_garbage_line(shard: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    root, entry = shard
    path = tmp_path / 'ds' / 'shard.00000.json'
    data = bytearray(path.read_bytes())
    data[0] = ord('[')
    path.write_bytes(bytes(data))
    with open_view(root, entry, str(tmp_path)) as view:
        with pytest.raises(ShardCorruptError, match='not valid JSON'):
            view[0]
        assert view[1]['words'] == 'twenty'
        with pytest.raises(IndexError):
            view[3]


@pytest.mark.parametrize('mutate,error', [
    (lambda e: e.update(separator=','), IndexFormatError), (lambda e: e.pop('raw_meta'), IndexFormatError),
    (lambda e: e.update(columns=['a']), IndexFormatError), (lambda e: e.update(newline=''), IndexFormatError),
    (lambda e: e['raw_meta'].update(basename='/abs/meta'), UnsafePathError),
    (lambda e: e.update(version=1), IndexFormatError),
])
def test_malformed_entries(shard: tuple[str, dict[str, Any]], mutate: Any, error: type) -> None:
    _, entry = shard
    mutate(entry)
    with pytest.raises(error):
        get_registry('format').get('json').reader(entry)


JSON_TEXT = st.text(max_size=30)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.fixed_dictionaries({'words': JSON_TEXT, 'number': st.integers(),
                                       'x': st.floats(allow_nan=False)}), max_size=15),
       st.sampled_from([None, 'zstd', 'br:1']), st.sampled_from(['\n', '\r\n']))
def test_hypothesis_round_trip(samples: list[dict[str, Any]], compression: str | None, newline: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write(os.path.join(tmp, 'ds'), samples, compression=compression, newline=newline, size_limit=200)
        assert read_all(root) == samples
