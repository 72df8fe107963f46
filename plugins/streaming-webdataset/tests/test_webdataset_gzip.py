"""Gzip-compressed WebDataset shards (``.tar.gz``/``.tgz``, read whole-file): the same samples as the plain tars,
locally, with DataLoader workers and over moto S3; corrupt, truncated and oversized gzip data named by file."""

from __future__ import annotations

import gzip
import os
import uuid
from typing import Any

import pytest
from test_webdataset_stream import BUCKET, s3_env, upload_dir  # noqa: F401  (s3_env is a fixture)
from wds_data import read_with_tarfile, sample_id, write_tars

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.plugin_api import ShardCorruptError
from tests.deps import require


def _gzip_dir(plain: str, out: str, suffix: str = '.tar.gz') -> None:
    """Gzip every tar of ``plain`` into ``out`` (``x.tar`` becomes ``x`` + ``suffix``)."""
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(plain)):
        with open(os.path.join(plain, name), 'rb') as source:
            data = gzip.compress(source.read(), mtime=0)
        with open(os.path.join(out, name[:-len('.tar')] + suffix), 'wb') as target:
            target.write(data)


def _expected(plain: str, suffix: str) -> list[dict[str, Any]]:
    """The plain tars' samples, with ``__url__`` naming the compressed file."""
    return [dict(s, __url__=s['__url__'][:-len('.tar')] + suffix) for s in read_with_tarfile(plain)]


@pytest.mark.parametrize('suffix', ['.tar.gz', '.tgz'])
def test_local_gzipped_tars_give_the_plain_tars_samples(tmp_path: Any, suffix: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tables = str(tmp_path / 'tables')
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', tables)
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=3, per_tar=20)
    _gzip_dir(plain, data, suffix)
    expected = _expected(plain, suffix)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert len(dataset) == 60
    assert list(dataset) == expected
    assert [dataset[i] for i in (0, 19, 20, 59)] == [expected[i] for i in (0, 19, 20, 59)]
    assert sorted(os.listdir(data)) == [f'shard-0000{t}{suffix}' for t in range(3)]  # nothing decompressed there
    # One shared plain copy per file, next to the sample tables.
    assert len([name for name in os.listdir(tables) if name.endswith('.tar')]) == 3


def test_tarwriter_gzip_with_two_workers(tmp_path: Any) -> None:
    require('webdataset')
    import webdataset as wds
    data, plain = str(tmp_path / 'data'), str(tmp_path / 'plain')
    os.makedirs(data)
    os.makedirs(plain)
    for t in range(3):
        for directory, suffix in ((data, '.tar.gz'), (plain, '.tar')):
            with wds.TarWriter(os.path.join(directory, f'train-{t}{suffix}')) as sink:
                for i in range(t * 20, (t + 1) * 20):
                    sink.write({'__key__': f'k{i:04d}', 'jpg': bytes([i]) * (40 + i), 'cls': i % 5})
    with open(os.path.join(data, 'train-0.tar.gz'), 'rb') as handle:
        assert handle.read(2) == b'\x1f\x8b'  # TarWriter compressed it
    ours = StreamingDataset(remote=data, local=str(tmp_path / 'cache'), batch_size=5, shuffle=True)
    loader = StreamingDataLoader(ours, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = {s['__key__']: s for batch in loader for s in batch}
    reference = {s['__key__']: dict(s, __url__=s['__url__'] + '.gz')
                 for s in StreamingDataset(local=plain, batch_size=5)}
    assert seen == reference and len(seen) == 60


@pytest.mark.slow
def test_gzipped_tars_over_s3_with_workers(tmp_path: Any, s3_env: Any) -> None:  # noqa: F811
    prefix = f'gz-{uuid.uuid4().hex}'
    plain, staging = str(tmp_path / 'plain'), str(tmp_path / 'staging')
    write_tars(plain, tars=3, per_tar=20)
    _gzip_dir(plain, staging)
    upload_dir(s3_env, staging, prefix)
    expected = {sample_id(s): s for s in _expected(plain, '.tar.gz')}
    dataset = StreamingDataset(remote=f's3://{BUCKET}/{prefix}', local=str(tmp_path / 'cache'), batch_size=5,
                               shuffle=True)
    assert len(dataset) == 60
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(sample_id(s) for s in seen) == list(range(60))
    for sample in seen:
        assert sample == expected[sample_id(sample)]


def _one_gz(tmp_path: Any) -> tuple[str, bytes]:
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=1, per_tar=10)
    _gzip_dir(plain, data)
    path = os.path.join(data, 'shard-00000.tar.gz')
    with open(path, 'rb') as handle:
        return path, handle.read()


def test_truncated_gzip_names_the_file(tmp_path: Any) -> None:
    path, data = _one_gz(tmp_path)
    with open(path, 'wb') as handle:
        handle.write(data[:len(data) // 2])
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz is truncated'):
        StreamingDataset(local=os.path.dirname(path), batch_size=1)


def test_corrupt_gzip_names_the_file(tmp_path: Any) -> None:
    path, data = _one_gz(tmp_path)
    with open(path, 'wb') as handle:
        handle.write(data[:10] + bytes(b ^ 0x5A for b in data[10:60]) + data[60:])
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz is not valid gzip data'):
        StreamingDataset(local=os.path.dirname(path), batch_size=1)


def test_decompressed_size_is_bounded(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = _one_gz(tmp_path)
    monkeypatch.setenv('STREAMING_WEBDATASET_GUNZIP_LIMIT', '4096')
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz decompresses to more than 4096 bytes'):
        StreamingDataset(local=os.path.dirname(path), batch_size=1)


def test_a_gzipped_file_that_is_no_tar_names_the_file(tmp_path: Any) -> None:
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'x.tar.gz').write_bytes(gzip.compress(b'hello world, not a tar' * 10))
    with pytest.raises(ShardCorruptError, match=r'x\.tar\.gz'):
        StreamingDataset(local=str(data), batch_size=1)


def test_with_the_table_cache_off_each_opening_decompresses_in_memory(tmp_path: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=2, per_tar=10)
    _gzip_dir(plain, data)
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', '')
    assert list(StreamingDataset(local=data, batch_size=2)) == _expected(plain, '.tar.gz')


def test_sidecar_and_convert_work_on_gzipped_tars(tmp_path: Any) -> None:
    import json

    from streaming_core.cli import main
    plain, data, out = str(tmp_path / 'plain'), str(tmp_path / 'data'), str(tmp_path / 'mds')
    write_tars(plain, tars=2, per_tar=10)
    _gzip_dir(plain, data)
    assert main(['index', data]) == 0
    rows = json.loads(open(os.path.join(data, 'webdataset-index.json')).read())['shardlist']
    assert [(r['url'], r['nsamples']) for r in rows] == [('shard-00000.tar.gz', 10), ('shard-00001.tar.gz', 10)]
    assert main(['convert', 'webdataset', data, out, '--quiet']) == 0
    expected = _expected(plain, '.tar.gz')
    converted = list(StreamingDataset(local=out, batch_size=2))
    assert [s['__key__'] for s in converted] == [s['__key__'] for s in expected]
    assert [s['json'] for s in converted] == [s['json'] for s in expected]
