"""Gzip-compressed WebDataset shards (``.tar.gz``/``.tgz``) are compressed shards of the core: the same samples as
the plain tars, locally, with DataLoader workers and over moto S3, read from the decompressed copy the core writes
(under ``.gunzipped/`` of the local directory); corrupt, truncated and oversized gzip data named by file."""

from __future__ import annotations

import gzip
import json
import os
import uuid
from typing import Any

import pytest
from test_webdataset_stream import BUCKET, s3_env, upload_dir  # noqa: F401  (s3_env is a fixture)
from wds_data import read_with_tarfile, sample_id, write_tars

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.plugin_api import IndexFormatError, ShardCorruptError
from tests.deps import require


def gzip_dir(plain: str, out: str, suffix: str = '.tar.gz') -> None:
    """Gzip every tar of ``plain`` into ``out`` (``x.tar`` becomes ``x`` + ``suffix``)."""
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(plain)):
        with open(os.path.join(plain, name), 'rb') as source:
            data = gzip.compress(source.read(), mtime=0)
        with open(os.path.join(out, name[:-len('.tar')] + suffix), 'wb') as target:
            target.write(data)


def expected_of(plain: str, suffix: str = '.tar.gz') -> list[dict[str, Any]]:
    """The plain tars' samples, with ``__url__`` naming the compressed file."""
    return [dict(s, __url__=s['__url__'][:-len('.tar')] + suffix) for s in read_with_tarfile(plain)]


def plain_copies(local: str) -> dict[str, list[str]]:
    """The decompressed copies under ``local``: compressed name -> its copies' file names."""
    top = os.path.join(local, '.gunzipped')
    if not os.path.isdir(top):
        return {}
    return {name: sorted(os.listdir(os.path.join(top, name))) for name in sorted(os.listdir(top))}


@pytest.mark.parametrize('suffix', ['.tar.gz', '.tgz'])
def test_local_gzipped_tars_give_the_plain_tars_samples(tmp_path: Any, suffix: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tables = str(tmp_path / 'tables')
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', tables)
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=3, per_tar=20)
    gzip_dir(plain, data, suffix)
    expected = expected_of(plain, suffix)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert len(dataset) == 60
    assert [reader.compression for reader in dataset.shards] == ['gz'] * 3
    assert list(dataset) == expected
    assert [dataset[i] for i in (0, 19, 20, 59)] == [expected[i] for i in (0, 19, 20, 59)]
    # No remote: the .tar.gz files stay, and the core decompressed each once into a hidden copy (never listed as a
    # tar of its own: a second dataset over the directory has the same 60 samples), byte for byte the plain tar.
    names = [f'shard-0000{t}{suffix}' for t in range(3)]
    assert sorted(os.listdir(data)) == ['.gunzipped'] + names
    copies = plain_copies(data)
    assert sorted(copies) == names and all(len(files) == 1 for files in copies.values())
    for t, name in enumerate(names):
        with open(os.path.join(data, '.gunzipped', name, copies[name][0]), 'rb') as copy, \
                open(os.path.join(plain, f'shard-0000{t}.tar'), 'rb') as original:
            assert copy.read() == original.read()
    assert not [name for name in os.listdir(tables) if name.endswith('.tar')]  # no copy outside the dataset
    assert list(StreamingDataset(local=data, batch_size=4)) == expected


def test_a_replaced_gzipped_tar_gets_a_new_copy_and_the_old_one_goes(tmp_path: Any) -> None:
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=2, per_tar=10)
    gzip_dir(plain, data)
    assert list(StreamingDataset(local=data, batch_size=2)) == expected_of(plain)
    before = plain_copies(data)['shard-00000.tar.gz']
    other = str(tmp_path / 'other')
    write_tars(other, tars=1, per_tar=10, start=100)
    gzip_dir(other, other)
    os.replace(os.path.join(other, 'shard-00010.tar.gz'), os.path.join(data, 'shard-00000.tar.gz'))  # ids 100..109
    again = StreamingDataset(local=data, batch_size=2)
    assert [sample_id(again[i]) for i in range(10)] == list(range(100, 110))
    after = plain_copies(data)['shard-00000.tar.gz']
    assert len(after) == 1 and after != before  # the copy of the earlier bytes was removed, never served


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
    cache = str(tmp_path / 'cache')
    ours = StreamingDataset(remote=data, local=cache, batch_size=5, shuffle=True)
    loader = StreamingDataLoader(ours, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = {s['__key__']: s for batch in loader for s in batch}
    reference = {s['__key__']: dict(s, __url__=s['__url__'] + '.gz')
                 for s in StreamingDataset(local=plain, batch_size=5)}
    assert seen == reference and len(seen) == 60
    # With a remote and no keep_zip, the downloaded .tar.gz is dropped once decompressed.
    assert os.listdir(cache) == ['.gunzipped'] and len(plain_copies(cache)) == 3


def test_keep_zip_keeps_the_downloaded_gzipped_tar(tmp_path: Any) -> None:
    plain, remote, cache = str(tmp_path / 'plain'), str(tmp_path / 'remote'), str(tmp_path / 'cache')
    write_tars(plain, tars=2, per_tar=5)
    gzip_dir(plain, remote)
    dataset = StreamingDataset(remote=remote, local=cache, batch_size=1, keep_zip=True)
    assert list(dataset) == expected_of(plain)
    assert sorted(os.listdir(cache)) == ['.gunzipped', 'shard-00000.tar.gz', 'shard-00001.tar.gz']


@pytest.mark.slow
def test_gzipped_tars_over_s3_with_workers(tmp_path: Any, s3_env: Any) -> None:  # noqa: F811
    prefix = f'gz-{uuid.uuid4().hex}'
    plain, staging = str(tmp_path / 'plain'), str(tmp_path / 'staging')
    write_tars(plain, tars=3, per_tar=20)
    gzip_dir(plain, staging)
    upload_dir(s3_env, staging, prefix)
    expected = {sample_id(s): s for s in expected_of(plain)}
    dataset = StreamingDataset(remote=f's3://{BUCKET}/{prefix}', local=str(tmp_path / 'cache'), batch_size=5,
                               shuffle=True)
    assert len(dataset) == 60
    loader = StreamingDataLoader(dataset, batch_size=5, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample for batch in loader for sample in batch]
    assert sorted(sample_id(s) for s in seen) == list(range(60))
    for sample in seen:
        assert sample == expected[sample_id(sample)]


def one_gz(tmp_path: Any, where: str = 'data') -> tuple[str, bytes]:
    """One ``.tar.gz`` of 10 samples in ``tmp_path/where``: its path and bytes."""
    plain, data = str(tmp_path / 'plain'), str(tmp_path / where)
    write_tars(plain, tars=1, per_tar=10)
    gzip_dir(plain, data)
    path = os.path.join(data, 'shard-00000.tar.gz')
    with open(path, 'rb') as handle:
        return path, handle.read()


def open_dataset(path: str, tmp_path: Any, remote: bool) -> StreamingDataset:
    """A dataset over the directory of ``path``, as ``local=`` or as ``remote=`` with a cache."""
    if remote:
        return StreamingDataset(remote=os.path.dirname(path), local=str(tmp_path / 'cache'), batch_size=1)
    return StreamingDataset(local=os.path.dirname(path), batch_size=1)


@pytest.mark.parametrize('remote', [False, True], ids=['local', 'remote'])
def test_truncated_gzip_names_the_file(tmp_path: Any, remote: bool) -> None:
    path, data = one_gz(tmp_path)
    with open(path, 'wb') as handle:
        handle.write(data[:len(data) // 2])
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz is truncated'):
        open_dataset(path, tmp_path, remote)


@pytest.mark.parametrize('remote', [False, True], ids=['local', 'remote'])
def test_corrupt_gzip_names_the_file(tmp_path: Any, remote: bool) -> None:
    path, data = one_gz(tmp_path)
    with open(path, 'wb') as handle:
        handle.write(data[:10] + bytes(b ^ 0x5A for b in data[10:60]) + data[60:])
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz is not valid gzip data'):
        open_dataset(path, tmp_path, remote)


def test_decompressed_size_is_bounded_while_indexing(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path, _ = one_gz(tmp_path)
    monkeypatch.setenv('STREAMING_WEBDATASET_GUNZIP_LIMIT', '4096')
    with pytest.raises(ShardCorruptError, match=r'shard-00000\.tar\.gz decompresses to more than 4096 bytes'):
        StreamingDataset(local=os.path.dirname(path), batch_size=1)


def test_a_gzipped_file_that_is_no_tar_names_the_file(tmp_path: Any) -> None:
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'x.tar.gz').write_bytes(gzip.compress(b'hello world, not a tar' * 10))
    with pytest.raises(ShardCorruptError, match=r'x\.tar\.gz'):
        StreamingDataset(local=str(data), batch_size=1)
    (data / 'x.tar.gz').write_bytes(gzip.compress(b''))
    with pytest.raises(ShardCorruptError, match=r'x\.tar\.gz decompresses to nothing'):
        StreamingDataset(local=str(data), batch_size=1)


def test_with_the_table_cache_off_gzipped_tars_still_read(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=2, per_tar=10)
    gzip_dir(plain, data)
    monkeypatch.setenv('STREAMING_WEBDATASET_TABLES', '')
    assert list(StreamingDataset(local=data, batch_size=2)) == expected_of(plain)


def test_an_index_from_the_earlier_plugin_is_refused_by_name() -> None:
    from streaming_webdataset.reader import WebDatasetFormat
    entry = {'format': 'webdataset', 'version': 2, 'samples': 3, 'compression': None, 'hashes': [],
             'size_limit': None, 'zip_data': None, 'raw_data': {'basename': 'a.tar.gz', 'bytes': 9000, 'hashes': {}},
             'columns': []}
    with pytest.raises(IndexFormatError, match=r'a\.tar\.gz is listed as a plain tar.*streaming cache clear'):
        WebDatasetFormat().reader(entry, where='shard 0')
    with pytest.raises(IndexFormatError, match=r"compression 'bz2' is not supported"):
        WebDatasetFormat().reader(dict(entry, compression='bz2', zip_data={'basename': 'a.tar.bz2', 'bytes': 10,
                                                                          'hashes': {}}), where='shard 0')


def test_convert_reads_gzipped_tars_without_writing_into_the_source(tmp_path: Any) -> None:
    from streaming_core.cli import main
    plain, data, out = str(tmp_path / 'plain'), str(tmp_path / 'data'), str(tmp_path / 'mds')
    write_tars(plain, tars=2, per_tar=10)
    gzip_dir(plain, data)
    assert main(['convert', 'webdataset', data, out, '--quiet']) == 0
    expected = expected_of(plain)
    converted = list(StreamingDataset(local=out, batch_size=2))
    assert [s['__key__'] for s in converted] == [s['__key__'] for s in expected]
    assert [s['json'] for s in converted] == [s['json'] for s in expected]
    assert sorted(os.listdir(data)) == ['shard-00000.tar.gz', 'shard-00001.tar.gz']


def test_a_tar_gz_replaced_in_a_directory_read_in_place_stops_the_job(tmp_path: Any) -> None:
    """Read in place, a .tar.gz is watched through its own listing entry (its decompressed copy has none): one
    replaced mid-job stops the job before its new samples are served under the old index."""
    from streaming_core.errors import DatasetVersionError
    plain, data, other = str(tmp_path / 'plain'), str(tmp_path / 'data'), str(tmp_path / 'other')
    write_tars(plain, tars=3, per_tar=10)
    gzip_dir(plain, data)
    write_tars(str(tmp_path / 'plain-other'), tars=2, per_tar=10, start=100)
    gzip_dir(str(tmp_path / 'plain-other'), other)
    dataset = StreamingDataset(local=data, batch_size=2)
    assert sample_id(dataset[0]) == 0
    os.replace(os.path.join(other, 'shard-00011.tar.gz'), os.path.join(data, 'shard-00001.tar.gz'))
    with pytest.raises(DatasetVersionError, match=r'shard-00001\.tar\.gz was replaced'):
        dataset[15]


def test_inspect_and_verify_see_compressed_shards(tmp_path: Any, capsys: Any) -> None:
    from streaming_core.cli import main
    plain, data = str(tmp_path / 'plain'), str(tmp_path / 'data')
    write_tars(plain, tars=2, per_tar=10)
    gzip_dir(plain, data)
    assert main(['inspect', data]) == 0
    shown = capsys.readouterr().out
    assert 'Compression:   gz (2 shards)' in shown and 'Raw bytes:     100.0 KiB' in shown
    write_tars(data, tars=1, per_tar=10, start=100, prefix='plain')  # beside them, one tar not compressed
    capsys.readouterr()
    assert main(['inspect', data, '--json']) == 0
    summary = json.loads(capsys.readouterr().out)
    ratio = summary['raw_bytes_compressed'] / summary['zip_bytes']
    assert summary['raw_bytes_compressed'] < summary['raw_bytes'] and 1 < ratio < 100
    assert main(['inspect', data]) == 0
    assert f'ratio {ratio:.2f})' in capsys.readouterr().out  # of the compressed files alone
    os.remove(os.path.join(data, 'plain-00010.tar'))
    assert list(StreamingDataset(local=data, batch_size=2)) == expected_of(plain)
    assert main(['verify', data, '--quiet']) == 0  # the .tar.gz files and the decompressed copies readers read
    copy = os.path.join(data, '.gunzipped', 'shard-00001.tar.gz', plain_copies(data)['shard-00001.tar.gz'][0])
    with open(copy, 'r+b') as handle:
        handle.seek(600)
        handle.write(b'XX')
    capsys.readouterr()
    assert main(['verify', data, '--quiet']) != 0
    assert 'differs from what shard-00001.tar.gz decompresses to' in capsys.readouterr().out
