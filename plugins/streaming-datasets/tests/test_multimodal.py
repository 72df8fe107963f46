from __future__ import annotations

import csv
import io
import json
import os
import random

import pytest

from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import StreamingLAION400M, StreamingWebVid, WriterOptions, convert_laion400m, convert_webvid
from streaming_datasets import laion as laion_module
from streaming_datasets import webvid as webvid_module
from streaming_datasets.conversion import SourceLayoutError
from streaming_datasets.webvid import csv_chunks

OPTIONS = WriterOptions(size_limit=1 << 11, progress=False)


# LAION-400M ---------------------------------------------------------------------------------------------------------
def _image_bytes(rng, helpers, size, fmt='JPEG'):
    out = io.BytesIO()
    helpers.random_image(rng, size).save(out, format=fmt)
    return out.getvalue()


@pytest.fixture
def laion_source(tmp_path, helpers):
    """Two metadata parquet files (5 + 3 rows) and the img2dataset folder for ``samples_per_shard=4``: shards 00000
    (file 1 rows 0-3), 00001 (file 1 row 4), 00002 (file 2 rows 0-2); two rows failed to download."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = random.Random(7)
    root = tmp_path / 'laion'
    images = root / 'laion400m-data'
    rows_per_file, shard, expected = (5, 3), 0, []
    failed = {'000002', '000020'}
    for number, rows in enumerate(rows_per_file):
        table = []
        for row in range(rows):
            sample_id = number * 100 + row
            table.append({'SAMPLE_ID': sample_id, 'URL': f'https://img.example/{sample_id}.jpg',
                          'TEXT': f'caption {sample_id}: ' + helpers.random_text(rng, 4), 'HEIGHT': 300 + row,
                          'WIDTH': 400 + row, 'LICENSE': '?', 'NSFW': 'UNLIKELY', 'similarity': 0.3 + row / 100})
        (root / 'meta').mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(table), root / 'meta' / f'part-{number:05d}-x.snappy.parquet',
                       row_group_size=2)  # shards span row groups
        for start in range(0, rows, 4):
            folder = images / f'{shard:05d}'
            folder.mkdir(parents=True)
            for offset, row in enumerate(table[start:start + 4]):
                key = f'{shard:05d}{offset}'
                if key in failed:
                    continue
                size = (rng.randint(6, 12), rng.randint(6, 12))
                data = _image_bytes(rng, helpers, size, 'PNG' if key == '000001' else 'JPEG')
                ext = '.png' if key == '000001' else '.jpg'
                (folder / (key + ext)).write_bytes(data)
                (folder / (key + '.txt')).write_text(row['TEXT'], encoding='utf-8')
                download = {'url': row['URL'], 'caption': row['TEXT'], 'key': key, 'status': 'success',
                            'width': size[0], 'height': size[1], 'original_width': row['WIDTH'],
                            'original_height': row['HEIGHT'], 'sha256': 'ab' * 32}
                (folder / (key + '.json')).write_text(json.dumps(download))
                expected.append({'key': key, 'url': row['URL'], 'caption': row['TEXT'], 'width': size[0],
                                 'height': size[1], 'image': data, 'metadata': row, 'download': download})
            shard += 1
    return str(images), str(root / 'meta'), expected


def test_laion_round_trip(laion_source, tmp_path, helpers):
    images, meta, expected = laion_source
    out = str(tmp_path / 'out')
    result = convert_laion400m(images, out, metadata=meta, samples_per_shard=4, options=OPTIONS)['train']
    assert (result.samples, result.skipped) == (6, 2)
    assert 'no downloaded image' in result.skip_reasons[0] and 'https://img.example/2.jpg' in result.skip_reasons[0]
    stored = LocalDataset(out, split='train')
    assert [stored[i] for i in range(len(stored))] == expected
    dataset = StreamingLAION400M(local=out, split='train', shuffle=True, batch_size=2)
    got = sorted((image.mode, image.tobytes(), caption) for image, caption in dataset)
    want = sorted(('RGB', helpers.pixels(e['image']), e['caption']) for e in expected)
    assert got == want


def test_laion_files_only_parallel_cli(laion_source, tmp_path, helpers):
    images, meta, expected = laion_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(laion_module.register, ['laion400m', images, out, '--workers', '2', '--no-progress']) == 0
    stored = LocalDataset(out, split='train')
    got = [stored[i] for i in range(len(stored))]
    assert [g['key'] for g in got] == [e['key'] for e in expected]
    assert all(g['metadata'] == {} and g['url'] == e['url'] and g['image'] == e['image']
               for g, e in zip(got, expected))


def test_laion_misaligned_metadata_and_strict(laion_source, tmp_path):
    images, meta, _ = laion_source
    with pytest.raises(SourceLayoutError, match='do not line up'):
        convert_laion400m(images, str(tmp_path / 'a'), metadata=meta, samples_per_shard=10_000, options=OPTIONS)
    with pytest.raises(SourceLayoutError, match='strict mode'):
        convert_laion400m(images, str(tmp_path / 'b'), metadata=meta, samples_per_shard=4, strict=True,
                          options=OPTIONS)
    assert not os.path.exists(tmp_path / 'b' / 'train' / 'index.json')
    with pytest.raises(SourceLayoutError, match='does not exist'):
        convert_laion400m(images, str(tmp_path / 'c'), metadata=str(tmp_path / 'nope.parquet'), options=OPTIONS)


# WebVid -------------------------------------------------------------------------------------------------------------
@pytest.fixture
def webvid_source(tmp_path, helpers):
    """``results_2M_val.csv`` (13 rows; captions with commas, quotes and a newline) and ``videos/<page_dir>/
    <videoid>.mp4`` (fake mp4 bytes) for all rows but two."""
    rng = random.Random(8)
    root = tmp_path / 'webvid'
    (root / 'videos').mkdir(parents=True)
    rows, expected, missing = [], [], {3, 9}
    for n in range(13):
        videoid, page_dir = str(1066674784 + n * 17), f'{1066674 + n % 3:07d}_{n % 3}'
        name = helpers.random_text(rng, rng.randint(1, 6)) + (', "quoted" and\nmultiline' if n == 5 else '')
        duration = f'PT00H00M{rng.randint(5, 59):02d}S'
        url = f'https://ak.picdn.net/shutterstock/videos/{videoid}/preview/stock-footage-{n}.mp4'
        rows.append([videoid, name, page_dir, duration, url])
        if n in missing:
            continue
        video = b'\x00\x00\x00\x18ftypmp42' + bytes(rng.getrandbits(8) for _ in range(rng.randint(20, 200)))
        (root / 'videos' / page_dir).mkdir(exist_ok=True)
        (root / 'videos' / page_dir / f'{videoid}.mp4').write_bytes(video)
        expected.append({'videoid': videoid, 'caption': name, 'page_dir': page_dir, 'duration': duration,
                         'content_url': url, 'video': video})
    with open(root / 'results_2M_val.csv', 'w', newline='', encoding='utf-8') as handle:
        writer = csv.writer(handle)
        writer.writerow(['videoid', 'name', 'page_dir', 'duration', 'contentUrl'])
        writer.writerows(rows)
    return str(root / 'results_2M_val.csv'), str(root / 'videos'), expected


def test_webvid_round_trip(webvid_source, tmp_path):
    csv_path, videos, expected = webvid_source
    out = str(tmp_path / 'out')
    result = convert_webvid(csv_path, videos, out, rows_per_chunk=4, options=OPTIONS)['train']
    assert (result.samples, result.skipped) == (11, 2)
    assert [LocalDataset(out, split='train')[i] for i in range(11)] == expected
    dataset = StreamingWebVid(local=out, split='train', shuffle=True, batch_size=2)
    assert sorted(dataset) == sorted((e['video'], e['caption']) for e in expected)


def test_webvid_chunks_respect_quoted_newlines(webvid_source):
    csv_path, _, _ = webvid_source
    header, chunks = csv_chunks(csv_path, rows_per_chunk=4)
    assert header == ['videoid', 'name', 'page_dir', 'duration', 'contentUrl']
    assert [c[2:] for c in chunks] == [(0, 4), (4, 4), (8, 4), (12, 1)]
    with open(csv_path, 'rb') as handle:
        data = handle.read()
    for start, end, _, rows in chunks:
        assert len(list(csv.reader(io.StringIO(data[start:end].decode(), newline='')))) == rows


def test_webvid_parallel_cli_and_errors(webvid_source, tmp_path, helpers):
    csv_path, videos, expected = webvid_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(webvid_module.register, ['webvid', csv_path, videos, out, '--split', 'val', '--workers',
                                                    '2', '--no-progress']) == 0
    assert [LocalDataset(out, split='val')[i] for i in range(11)] == expected
    with pytest.raises(SourceLayoutError, match='was not downloaded'):
        convert_webvid(csv_path, videos, str(tmp_path / 'a'), strict=True, options=OPTIONS)
    bad = tmp_path / 'bad.csv'
    bad.write_text('videoid,name\n1,x\n')
    with pytest.raises(SourceLayoutError, match=r"lacks \['page_dir', 'duration', 'contentUrl'\]"):
        convert_webvid(str(bad), videos, str(tmp_path / 'b'), options=OPTIONS)
    bad.write_text('videoid,name,page_dir,duration,contentUrl\n1,x,../etc,PT1S,u\n')
    with pytest.raises(SourceLayoutError, match="page_dir '../etc' cannot name"):
        convert_webvid(str(bad), videos, str(tmp_path / 'c'), options=OPTIONS)
