"""CSV, TSV and XSV: the spec 1.3/3.2 bytes, the key sets, reading, hostile input and round trips."""

from __future__ import annotations

import json
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
from streaming_csv import CSVWriter, TSVWriter, XSVWriter

SAMPLES = [{'words': 'one', 'number': 1, 'x': 1.5}, {'words': 'twenty', 'number': -20, 'x': 2.0},
           {'words': '', 'number': 300, 'x': 0.0}]
COLUMNS = {'words': 'str', 'number': 'int', 'x': 'float'}
MAKERS = {'csv': lambda **kw: CSVWriter(columns=COLUMNS, **kw), 'tsv': lambda **kw: TSVWriter(columns=COLUMNS, **kw),
          'xsv': lambda **kw: XSVWriter(columns=COLUMNS, separator='|', **kw)}
SEPARATORS = {'csv': ',', 'tsv': '\t', 'xsv': '|'}


def write(fmt: str, out: str, samples: list[dict[str, Any]], **kwargs: Any) -> str:
    with MAKERS[fmt](out=out, **kwargs) as writer:
        for sample in samples:
            writer.write(sample)
    return out


def entries_of(root: str) -> list[dict[str, Any]]:
    with open(os.path.join(root, 'index.json')) as handle:
        return json.load(handle)['shards']


def open_view(root: str, entry: dict[str, Any], scratch: str) -> Any:
    reader = get_registry('format').get(entry['format']).reader(entry)
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
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        for entry in entries_of(root):
            with open_view(root, entry, scratch) as view:
                out.extend(view[i] for i in range(len(view)))
    return out


def test_csv_spec_bytes_and_index(tmp_path: Any) -> None:
    root = write('csv', str(tmp_path / 'ds'), SAMPLES)
    data = (tmp_path / 'ds' / 'shard.00000.csv').read_bytes()
    assert data == b'number,words,x\n1,one,1.5\n-20,twenty,2.0\n300,,0.0\n' and len(data) == 49
    meta = (tmp_path / 'ds' / 'shard.00000.csv.meta').read_bytes()
    config = ('{"column_encodings": ["int", "str", "float"], "column_names": ["number", "words", "x"], '
              '"compression": null, "format": "csv", "hashes": [], "newline": "\\n", "size_limit": 67108864, '
              '"version": 2}')
    assert meta == bytes.fromhex('03000000' '0f000000' '19000000' '28000000' '31000000') + config.encode()
    assert len(meta) == 214
    assert (tmp_path / 'ds' / 'index.json').read_text() == (
        '{"shards": [{"column_encodings": ["int", "str", "float"], "column_names": ["number", "words", "x"], '
        '"compression": null, "format": "csv", "hashes": [], "newline": "\\n", "raw_data": {"basename": '
        '"shard.00000.csv", "bytes": 49, "hashes": {}}, "raw_meta": {"basename": "shard.00000.csv.meta", "bytes": '
        '214, "hashes": {}}, "samples": 3, "size_limit": 67108864, "version": 2, "zip_data": null, "zip_meta": '
        'null}], "version": 2}')
    assert read_all(root) == SAMPLES


def test_tsv_and_xsv_index_differences(tmp_path: Any) -> None:
    csv_text = (write('csv', str(tmp_path / 'c'), SAMPLES) and (tmp_path / 'c' / 'index.json').read_text())
    tsv_text = (write('tsv', str(tmp_path / 't'), SAMPLES) and (tmp_path / 't' / 'index.json').read_text())
    assert tsv_text == csv_text.replace('"csv"', '"tsv"').replace('.csv', '.tsv')
    write('xsv', str(tmp_path / 'x'), SAMPLES)
    xsv = entries_of(str(tmp_path / 'x'))[0]
    csv = entries_of(str(tmp_path / 'c'))[0]
    assert xsv['raw_meta']['bytes'] == 232 and xsv['separator'] == '|' and xsv['format'] == 'xsv'
    assert set(xsv) - set(csv) == {'separator'}
    assert (tmp_path / 't' / 'shard.00000.tsv').read_bytes() == b'number\twords\tx\n1\tone\t1.5\n' \
        b'-20\ttwenty\t2.0\n300\t\t0.0\n'
    assert (tmp_path / 'x' / 'shard.00000.xsv.meta').read_bytes().endswith(b'"separator": "|", '
                                                                           b'"size_limit": 67108864, "version": 2}')
    for name in ('t', 'x'):
        assert read_all(str(tmp_path / name)) == SAMPLES


@pytest.mark.parametrize('fmt', sorted(MAKERS))
def test_no_quoting_refused(fmt: str, tmp_path: Any) -> None:
    writer = MAKERS[fmt](out=str(tmp_path / 'ds'))
    with pytest.raises(CodecError, match='do not quote'):
        writer.write({'words': f'a{SEPARATORS[fmt]}b', 'number': 1, 'x': 1.0})
    with pytest.raises(CodecError, match='do not quote'):
        writer.write({'words': 'a\nb', 'number': 1, 'x': 1.0})
    with pytest.raises(CodecError, match='do not quote'):
        XSVWriter(columns={'a|b': 'str'}, separator='|', out=str(tmp_path / 'other'))


def test_writer_validation(tmp_path: Any) -> None:
    with pytest.raises(CodecError, match='takes str, int, float'):
        CSVWriter(columns={'a': 'bytes'}, out=str(tmp_path / 'a'))
    with pytest.raises(ValueError, match='separator'):
        XSVWriter(columns=COLUMNS, separator='', out=str(tmp_path / 'b'))
    with pytest.raises(TypeError):
        XSVWriter(columns=COLUMNS, out=str(tmp_path / 'c'))  # separator is required
    with pytest.raises(TypeError):
        CSVWriter(columns=COLUMNS, separator=';', out=str(tmp_path / 'd'))


def test_multi_char_separator_and_crlf(tmp_path: Any) -> None:
    root = str(tmp_path / 'ds')
    with XSVWriter(columns=COLUMNS, separator=' :: ', newline='\r\n', out=root, size_limit=30) as writer:
        for sample in SAMPLES:
            writer.write(sample)
    assert [e['samples'] for e in entries_of(root)] == [1, 1, 1]
    assert read_all(root) == SAMPLES


# ---------------------------------------------------------------------------------------------------------------
# Hostile input


@pytest.fixture
def shard(tmp_path: Any) -> tuple[str, dict[str, Any]]:
    root = write('csv', str(tmp_path / 'ds'), SAMPLES)
    return root, entries_of(root)[0]


def test_header_must_match(shard: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    root, entry = shard
    path = tmp_path / 'ds' / 'shard.00000.csv'
    path.write_bytes(b'numbxr' + path.read_bytes()[6:])
    with pytest.raises(ShardCorruptError, match='header'):
        open_view(root, entry, str(tmp_path))


@pytest.mark.parametrize('offset_index,value,match', [(0, 0, 'first sample offset'), (3, 1000, 'past the end'),
                                                      (2, 16, 'decrease')])
def test_bad_offsets(shard: tuple[str, dict[str, Any]], tmp_path: Any, offset_index: int, value: int,
                     match: str) -> None:
    root, entry = shard
    meta = tmp_path / 'ds' / 'shard.00000.csv.meta'
    data = bytearray(meta.read_bytes())
    data[4 + 4 * offset_index:8 + 4 * offset_index] = struct.pack('<I', value)
    meta.write_bytes(bytes(data))
    with pytest.raises(ShardCorruptError, match=match):
        open_view(root, entry, str(tmp_path))


def test_bad_fields(shard: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    root, entry = shard
    path = tmp_path / 'ds' / 'shard.00000.csv'
    path.write_bytes(path.read_bytes().replace(b'1,one,1.5', b'x,one,1.5').replace(b'-20,twenty,2.0',
                                                                                 b'-20,twentyX2.0'))
    with open_view(root, entry, str(tmp_path)) as view:
        with pytest.raises(ShardCorruptError, match='not a valid int'):
            view[0]
        with pytest.raises(ShardCorruptError, match='fields'):
            view[1]
        assert view[2] == SAMPLES[2]


@pytest.mark.parametrize('fmt,mutate', [
    ('csv', lambda e: e.update(separator=',')), ('csv', lambda e: e.pop('newline')),
    ('csv', lambda e: e.update(column_encodings=['int', 'bytes', 'float'])),
    ('csv', lambda e: e.update(column_names=['a', 'b'])), ('xsv', lambda e: e.pop('separator')),
    ('xsv', lambda e: e.update(separator='')), ('tsv', lambda e: e.update(samples=True)),
])
def test_malformed_entries(fmt: str, mutate: Any, tmp_path: Any) -> None:
    entry = entries_of(write(fmt, str(tmp_path / 'ds'), SAMPLES))[0]
    mutate(entry)
    with pytest.raises(IndexFormatError):
        get_registry('format').get(fmt).reader(entry)


def test_unsafe_meta_name(shard: tuple[str, dict[str, Any]]) -> None:
    _, entry = shard
    entry['raw_meta']['basename'] = '../../shard.00000.csv.meta'
    with pytest.raises(UnsafePathError):
        get_registry('format').get('csv').reader(entry)


TEXT = st.text(st.characters(blacklist_characters=',\t|\n\r', blacklist_categories=('Cs',)), max_size=12)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.fixed_dictionaries({'words': TEXT, 'number': st.integers(),
                                       'x': st.floats(allow_nan=False)}), max_size=12),
       st.sampled_from(sorted(MAKERS)), st.sampled_from([None, 'snappy', 'gz:1']))
def test_hypothesis_round_trip(samples: list[dict[str, Any]], fmt: str, compression: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write(fmt, os.path.join(tmp, 'ds'), samples, compression=compression, size_limit=120)
        assert read_all(root) == samples
