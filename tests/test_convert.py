"""Converters: JSON lines, CSV, Parquet, image folders; inference, parallel partitions in source order, errors."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
from decimal import Decimal

import numpy as np
import pytest

from streaming_core import LocalDataset
from streaming_core.errors import DirectoryNotEmptyError
from streaming_core.tools.convert import (
    ConversionError,
    convert_csv,
    convert_imagefolder,
    convert_jsonl,
    convert_parquet,
    parse_columns,
)
from streaming_core.tools.convert.text import CSVSource, JSONLSource, TextPart, next_record_start
from tests.deps import require


def _all(path):
    data = LocalDataset(path)
    return [data[i] for i in range(len(data))]


def _index(path):
    with open(os.path.join(path, 'index.json')) as handle:
        return json.load(handle)


def _jsonl(path, records):
    with open(path, 'w', encoding='utf-8') as handle:
        for record in records:
            handle.write(json.dumps(record) + '\n')


RECORDS = [{'id': i, 'text': f'ünï "{i}"\\n', 'score': i / 7 if i % 3 else i, 'tags': ['a', i], 'ok': i % 2 == 0}
           for i in range(400)]


# ---------------------------------------------------------------------------------------------------------------
def test_parse_columns():
    assert parse_columns(None) is None
    assert parse_columns(['id:int,emb:ndarray:float32:2,3', 'text']) == {'id': 'int', 'emb': 'ndarray:float32:2,3',
                                                                         'text': None}
    assert parse_columns('img:list[jpeg], label') == {'img': 'list[jpeg]', 'label': None}
    with pytest.raises(ValueError, match='twice'):
        parse_columns('a:int,a:str')
    with pytest.raises(ValueError, match='NAME'):
        parse_columns(':int')


def test_jsonl_inference_rules(tmp_path):
    src = tmp_path / 'a.jsonl'
    _jsonl(src, [{'i': 1, 'f': 1, 's': 'x', 'b': True, 'n': None, 'l': [1], 'o': {'k': 1}, 'm': 1},
                 {'i': 2, 'f': 2.5, 's': 'y', 'b': False, 'n': None, 'l': [], 'o': {}}])
    assert JSONLSource(str(src)).infer_columns() == {'i': 'int', 'f': 'float64', 's': 'str', 'b': 'json',
                                                     'n': 'json', 'l': 'json', 'o': 'json', 'm': 'json'}
    result = convert_jsonl(str(src), str(tmp_path / 'out'), progress=False)
    rows = _all(str(tmp_path / 'out'))
    assert result.samples == 2 and rows[1]['m'] is None and rows[0]['b'] is True and rows[1]['f'] == 2.5


@pytest.mark.parametrize('workers', [1, 3, 8])
def test_jsonl_parallel_keeps_source_order(tmp_path, workers):
    src = tmp_path / 'src'
    src.mkdir()
    _jsonl(src / 'part-0.jsonl', RECORDS[:150])
    with gzip.open(src / 'part-1.jsonl.gz', 'wt', encoding='utf-8') as handle:  # compressed: never split
        for record in RECORDS[150:260]:
            handle.write(json.dumps(record) + '\n')
    with open(src / 'part-2.jsonl', 'w', encoding='utf-8') as handle:
        for record in RECORDS[260:]:
            handle.write(json.dumps(record) + '\n\n')  # blank lines are skipped
    out = str(tmp_path / f'out{workers}')
    result = convert_jsonl(str(src), out, workers=workers, size_limit=1 << 12, progress=False, hashes=['sha1'])
    assert result.samples == len(RECORDS) and result.partitions == workers
    rows = _all(out)
    assert [r['id'] for r in rows] == list(range(len(RECORDS)))
    assert rows[7]['text'] == RECORDS[7]['text'] and rows[7]['tags'] == ['a', 7] and rows[8]['ok'] is True
    if workers > 1:
        assert sorted(os.listdir(out))[0] == '0' and all(e['hashes'] == ['sha1'] for e in _index(out)['shards'])


def test_text_splits_land_on_record_starts(tmp_path):
    path = tmp_path / 'q.csv'
    rows = [['id', 'note']] + [[str(i), f'line\n"{i}",\n' * (i % 3)] for i in range(200)]
    with open(path, 'w', newline='', encoding='utf-8') as handle:
        csv.writer(handle).writerows(rows)
    data = path.read_bytes()
    source = CSVSource(str(path))
    for parts in (2, 5, 13, 40):
        got = [r for part in source.split(parts) for r in source.read(part, lambda n: None)]
        assert [r['id'] for r in got] == [str(i) for i in range(200)]
        assert got[5]['note'] == rows[6][1]
    for offset in range(1, len(data), 97):  # every cut lands after a newline outside quotes
        start = next_record_start(str(path), offset, b'"')
        assert start >= offset and data[start - 1:start] == b'\n' and data[:start].count(b'"') % 2 == 0
    jsonl = tmp_path / 'x.jsonl'
    _jsonl(jsonl, RECORDS[:50])
    source = JSONLSource(str(jsonl))
    for parts in (1, 4, 50, 60):
        got = [r['id'] for part in source.split(parts) for r in source.read(part, lambda n: None)]
        assert got == list(range(50))
    assert list(source.read(TextPart((0, 0), (0, 0)), lambda n: None)) == []


def test_csv_inference_formats_and_delimiter(tmp_path):
    path = tmp_path / 'd.csv'
    with open(path, 'w', newline='') as handle:
        writer = csv.writer(handle)
        writer.writerow(['n', 'x', 'name'])
        for i in range(50):
            writer.writerow([i, f'{i}.5' if i else '1e3', f'n {i}'])
    assert CSVSource(str(path)).infer_columns() == {'n': 'int', 'x': 'float64', 'name': 'str'}
    convert_csv(str(path), str(tmp_path / 'mds'), workers=2, progress=False)
    rows = _all(str(tmp_path / 'mds'))
    assert rows[3] == {'n': 3, 'x': 3.5, 'name': 'n 3'}
    for fmt in ('json', 'csv', 'tsv'):
        out = str(tmp_path / fmt)
        result = convert_csv(str(path), out, format=fmt, workers=2, progress=False)
        assert result.columns == {'n': 'int', 'x': 'float', 'name': 'str'}
        assert _index(out)['shards'][0]['format'] == fmt
        assert _all(out)[49] == {'n': 49, 'x': 49.5, 'name': 'n 49'}
    tsv = tmp_path / 't.tsv'
    tsv.write_text('a\tb\n1\tx y\n2\tz\n')
    convert_csv(str(tsv), str(tmp_path / 'tsvout'), progress=False)
    assert _all(str(tmp_path / 'tsvout')) == [{'a': 1, 'b': 'x y'}, {'a': 2, 'b': 'z'}]
    other = tmp_path / 'multi'
    other.mkdir()
    (other / 'a.csv').write_text('p,q\n1,2\n')
    (other / 'b.csv').write_text('p,r\n1,2\n')
    with pytest.raises(ValueError, match='same columns'):
        CSVSource(str(other))


def test_explicit_columns_and_bad_values(tmp_path):
    src = tmp_path / 'a.jsonl'
    _jsonl(src, [{'id': i, 'v': [i, i + 1], 'd': str(i / 4), 'skip': 'x'} for i in range(20)])
    out = str(tmp_path / 'out')
    result = convert_jsonl(str(src), out, columns={'id': 'int32', 'v': 'ndarray:uint8:2', 'd': 'str_decimal'},
                           progress=False)
    assert result.columns == {'id': 'int32', 'v': 'ndarray:uint8:2', 'd': 'str_decimal'}
    row = _all(out)[5]
    assert row['v'].dtype == np.uint8 and row['v'].tolist() == [5, 6] and row['d'] == Decimal('1.25')
    assert 'skip' not in row
    with pytest.raises(ConversionError, match="record 0 of this part, column 'd'.*int"):
        convert_jsonl(str(src), str(tmp_path / 'bad'), columns={'d': 'int'}, progress=False)
    with pytest.raises(LookupError, match="Column 'id': unknown encoding 'int33'"):
        convert_jsonl(str(src), str(tmp_path / 'bad2'), columns={'id': 'int33'}, progress=False)
    with pytest.raises(ValueError, match="column 'v' is json"):
        convert_jsonl(str(src), str(tmp_path / 'bad3'), format='json', progress=False)
    with pytest.raises(ValueError, match="'nope' is not in"):
        convert_jsonl(str(src), str(tmp_path / 'bad4'), columns={'nope': None}, progress=False)
    mixed = tmp_path / 'm.jsonl'
    _jsonl(mixed, [{'a': 1}] * 1000 + [{'a': 'text'}])  # inferred from the first 1000 records
    with pytest.raises(ConversionError, match=r"bytes \d+-\d+: record 499 of this part, column 'a'.*--columns"):
        convert_jsonl(str(mixed), str(tmp_path / 'bad5'), progress=False, workers=2)
    assert not os.path.exists(tmp_path / 'bad5' / 'index.json')


def test_output_refusals_and_exist_ok(tmp_path):
    src = tmp_path / 'a.jsonl'
    _jsonl(src, RECORDS[:10])
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'old').write_text('x')
    for workers in (1, 2):
        with pytest.raises(DirectoryNotEmptyError, match='not empty'):
            convert_jsonl(str(src), str(out), workers=workers, progress=False)
    convert_jsonl(str(src), str(out), workers=2, exist_ok=True, progress=False)
    assert not (out / 'old').exists() and len(_all(str(out))) == 10
    with pytest.raises(FileNotFoundError, match='does not exist'):
        convert_jsonl(str(tmp_path / 'nothing.jsonl'), str(tmp_path / 'x'), progress=False)
    with pytest.raises(ValueError, match='workers'):
        convert_jsonl(str(src), str(tmp_path / 'y'), workers=0, progress=False)
    with pytest.raises(LookupError, match='shard format'):
        convert_jsonl(str(src), str(tmp_path / 'z'), format='nope', progress=False)


def test_remote_pair_output(tmp_path):
    """A (local, remote) output through the storage registry (file:// remote), written by 2 partitions."""
    src = tmp_path / 'a.jsonl'
    _jsonl(src, RECORDS)
    local, remote = tmp_path / 'local', tmp_path / 'remote'
    result = convert_jsonl(str(src), (str(local), f'file://{remote}'), workers=2, compression='gz', progress=False)
    assert result.out == f'file://{remote}/index.json'
    assert not os.path.exists(local / '0')  # keep_local=False: uploaded partitions are not kept
    from streaming_core import StreamingDataset
    data = StreamingDataset(remote=f'file://{remote}', local=str(tmp_path / 'cache'), batch_size=1)
    assert [data[i]['id'] for i in range(data.num_samples)] == list(range(len(RECORDS)))


# ---------------------------------------------------------------------------------------------------------------
def test_parquet_types_and_row_ranges(tmp_path):
    require('pyarrow')
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq
    n = 90
    table = pa.table({
        'i8': pa.array([i % 100 for i in range(n)], pa.int8()),
        'u16': pa.array(range(n), pa.uint16()),
        'f32': pa.array([i / 2 for i in range(n)], pa.float32()),
        's': pa.array([f's{i}' for i in range(n)]),
        'b': pa.array([bytes([i]) for i in range(n)], pa.binary()),
        'dec': pa.array([Decimal(i) / 4 for i in range(n)], pa.decimal128(8, 2)),
        'flag': pa.array([i % 2 == 0 for i in range(n)]),
        'vec': pa.array([[i, i] for i in range(n)], pa.list_(pa.int32())),
        'grid': pa.array([[[i, 0.5], [1.0, 2.0]] for i in range(n)], pa.list_(pa.list_(pa.float64()))),
        'when': pa.array([datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=i) for i in range(n)]),
        'meta': pa.array([{'k': i} for i in range(n)]),
    })
    src = tmp_path / 'pq'
    src.mkdir()
    pq.write_table(table.slice(0, 40), src / 'a.parquet', row_group_size=7)
    (src / 'sub').mkdir()
    pq.write_table(table.slice(40), src / 'sub' / 'b.parquet', row_group_size=11)
    for workers in (1, 4):
        out = str(tmp_path / f'out{workers}')
        result = convert_parquet(str(src), out, workers=workers, progress=False)
        assert result.columns == {'i8': 'int8', 'u16': 'uint16', 'f32': 'float32', 's': 'str', 'b': 'bytes',
                                  'dec': 'str_decimal', 'flag': 'json', 'vec': 'ndarray:int32',
                                  'grid': 'ndarray:float64', 'when': 'str', 'meta': 'json'}
        rows = _all(out)
        assert [int(r['u16']) for r in rows] == list(range(n))
        r = rows[77]
        assert r['s'] == 's77' and r['b'] == bytes([77]) and r['dec'] == Decimal('19.25') and r['flag'] is False
        assert r['vec'].tolist() == [77, 77] and r['grid'].shape == (2, 2) and r['meta'] == {'k': 77}
        assert r['when'] == '2024-01-04T05:00:00'
    out = str(tmp_path / 'subset')
    convert_parquet(str(src), out, columns={'s': None, 'u16': 'int'}, progress=False)
    assert _all(out)[3] == {'s': 's3', 'u16': 3}


# ---------------------------------------------------------------------------------------------------------------
def _images(root, mixed=False):
    require('PIL')
    from PIL import Image
    files = {}
    for label, name in enumerate(['cat', 'ant', 'dog']):
        folder = root / name
        (folder / 'nested').mkdir(parents=True)
        for i in range(3):
            image = Image.new('RGB', (8 + i, 6), (label * 60, i * 40, 10))
            ext = 'png' if mixed and i == 1 else 'jpg'
            path = folder / ('nested' if i == 2 else '.') / f'img{i}.{ext}'
            image.save(path, format='PNG' if ext == 'png' else 'JPEG')
            files[os.path.relpath(path, root).replace(os.sep, '/')] = path.read_bytes()
    (root / 'cat' / 'notes.txt').write_text('not an image')
    (root / '.hidden').mkdir()
    return files


def test_imagefolder_keeps_original_bytes(tmp_path):
    files = _images(tmp_path / 'imgs')
    out = str(tmp_path / 'out')
    result = convert_imagefolder(str(tmp_path / 'imgs'), out, workers=2, progress=False)
    assert result.columns == {'image': 'jpeg', 'label': 'int', 'label_name': 'str', 'path': 'str'}
    rows = _all(out)
    assert [r['label_name'] for r in rows] == ['ant'] * 3 + ['cat'] * 3 + ['dog'] * 3
    assert [r['label'] for r in rows] == [0] * 3 + [1] * 3 + [2] * 3
    assert rows[3]['path'] == 'cat/img0.jpg' and rows[5]['path'] == 'cat/nested/img2.jpg'
    for row in rows:
        assert row['image'].size[0] in (8, 9, 10)
    # The stored bytes are the files' bytes: check through the MDS raw payload hash.
    payloads = _raw_image_bytes(out)
    assert [hashlib.sha1(p).hexdigest() for p in payloads] == \
        [hashlib.sha1(files[r['path']]).hexdigest() for r in rows]


def _raw_image_bytes(out):
    from streaming_core.machinery.lookup import get_registry
    index = _index(out)
    payloads = []
    for entry in index['shards']:
        reader = get_registry('format').get('mds').reader(entry, where='test')
        view = reader.open([os.path.join(out, entry['raw_data']['basename'])])
        position = entry['column_names'].index('image')
        for i in range(len(view)):
            data = bytes(view.get_raw(i))
            sizes = entry['column_sizes']
            variable = [j for j, s in enumerate(sizes) if s is None]
            lengths = np.frombuffer(data[:4 * len(variable)], '<u4').tolist()
            pos = 4 * len(variable)
            for j, size in enumerate(sizes):
                length = size if size is not None else lengths[variable.index(j)]
                if j == position:
                    payloads.append(data[pos:pos + length])
                pos += length
        view.close()
    return payloads


def test_imagefolder_mixed_and_reencoded(tmp_path):
    _images(tmp_path / 'imgs', mixed=True)
    out = str(tmp_path / 'mixed')
    result = convert_imagefolder(str(tmp_path / 'imgs'), out, progress=False)
    assert result.columns['image'] == 'bytes'
    rows = _all(out)
    from PIL import Image
    assert Image.open(io.BytesIO(rows[1]['image'])).format == 'PNG'
    out = str(tmp_path / 'pil')
    convert_imagefolder(str(tmp_path / 'imgs'), out, columns={'image': 'pil', 'label': None}, progress=False)
    rows = _all(out)
    assert sorted(rows[0]) == ['image', 'label'] and rows[0]['image'].mode == 'RGB'
    with pytest.raises(FileNotFoundError, match='class subdirectories'):
        empty = tmp_path / 'empty'
        empty.mkdir()
        convert_imagefolder(str(empty), str(tmp_path / 'x'), progress=False)
