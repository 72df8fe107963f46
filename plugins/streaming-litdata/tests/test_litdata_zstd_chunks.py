"""litdata's whole-file zstd chunks (``optimize(..., compression='zstd', compression_level='chunk')``: ``.zstd.bin``
files whose index.json records only the decompressed size) read as compressed shards: every item as litdata 0.2.76
reads it (golden ``mixed-zstd-chunk``), their compressed sizes found by ranged reads or a listing, a chunk litdata
decompressed in place read as it is, over moto S3 shuffled with two workers under a ``cache_limit`` that forces
eviction, ``keep_zip``, and a truncated, inflated or short ``.zstd.bin`` is a ShardCorruptError naming it."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import sys
import uuid
from typing import Any

import pytest

from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_core.errors import IndexFormatError, ShardCorruptError
from tests.deps import require
from tests.fixtures.s3 import moto_bucket
from tests.fixtures.servers import RunningServer

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
if GOLDEN not in sys.path:
    sys.path.insert(0, GOLDEN)
NAME = 'mixed-zstd-chunk'
CHUNKS = ('chunk-0-0', 'chunk-0-1', 'chunk-0-2')


def _expected() -> list[Any]:
    with open(os.path.join(GOLDEN, f'{NAME}-expected.pkl'), 'rb') as handle:
        return pickle.load(handle)


def _copy(tmp_path: Any, dest: str = NAME) -> str:
    out = str(tmp_path / dest)
    shutil.copytree(os.path.join(GOLDEN, NAME), out)
    return out


def _chunk_bytes(root: str) -> dict[str, int]:
    with open(os.path.join(root, 'index.json')) as handle:
        return {c['filename']: c['chunk_bytes'] for c in json.load(handle)['chunks']}


def _zstd() -> Any:
    require('zstandard')
    import zstandard
    return zstandard


def test_the_golden_chunks_are_whole_file_zstd() -> None:
    """litdata wrote .zstd.bin files (one zstd frame each) and an index.json without their compressed sizes."""
    with open(os.path.join(GOLDEN, NAME, 'index.json')) as handle:
        obj = json.load(handle)
    assert (obj['config']['compression'], obj['config']['compression_level']) == ('zstd', None)
    assert [c['filename'] for c in obj['chunks']] == [f'{c}.zstd.bin' for c in CHUNKS]
    zstandard = _zstd()
    for chunk in obj['chunks']:
        data = open(os.path.join(GOLDEN, NAME, chunk['filename']), 'rb').read()
        assert len(data) < chunk['chunk_bytes'] // 2
        assert len(zstandard.ZstdDecompressor().decompress(data)) == chunk['chunk_bytes']


def test_every_item_equals_litdatas_reading_and_the_zip_is_kept(tmp_path: Any) -> None:
    from make_golden import canonical
    data = _copy(tmp_path)
    dataset = StreamingDataset(local=data, batch_size=4)
    expected = _expected()
    assert len(dataset) == len(expected) == 40
    assert [canonical(item) for item in dataset] == expected
    assert canonical(dataset[37]) == expected[37]
    sizes = _chunk_bytes(data)
    for chunk in CHUNKS:  # no other copy: the .zstd.bin stays; the decompressed chunk is named as litdata names it
        assert os.path.getsize(os.path.join(data, f'{chunk}.zstd.bin')) == \
            os.path.getsize(os.path.join(GOLDEN, NAME, f'{chunk}.zstd.bin'))
        assert os.path.getsize(os.path.join(data, f'{chunk}.bin')) == sizes[f'{chunk}.zstd.bin']


def test_entries_are_compressed_shards_sized_by_ranged_reads_or_a_listing() -> None:
    from streaming_core.reading.derived_index import SourceFile
    from streaming_litdata import LitdataIndexBuilder
    from streaming_litdata.sizes import local_reader
    root = os.path.join(GOLDEN, NAME)
    reads: list[tuple[str, int, int]] = []
    local = local_reader(root)

    def read(name: str, start: int, length: int) -> bytes:
        reads.append((name, start, length))
        return local(name, start, length)
    index_file = SourceFile('index.json', os.path.getsize(os.path.join(root, 'index.json')))
    index = LitdataIndexBuilder().build([index_file], read, where=root)
    sizes = _chunk_bytes(root)
    for chunk, entry in zip(CHUNKS, index['shards']):
        zipped = f'{chunk}.zstd.bin'
        assert entry['compression'] == 'zstd' and entry['in_file_compression'] is None
        assert entry['zip_data'] == {'basename': zipped, 'bytes': os.path.getsize(os.path.join(root, zipped)),
                                     'hashes': {}}
        assert entry['raw_data'] == {'basename': f'{chunk}.bin', 'bytes': sizes[zipped], 'hashes': {}}
    assert sorted(name for name, _, _ in reads if name != 'index.json') == [f'{c}.zstd.bin' for c in CHUNKS]
    listed = [index_file] + [SourceFile(f'{c}.zstd.bin', os.path.getsize(os.path.join(root, f'{c}.zstd.bin')))
                             for c in CHUNKS]
    reads.clear()
    assert LitdataIndexBuilder().build(listed, read, where=root) == index
    assert {name for name, _, _ in reads} == {'index.json'}  # the listing's sizes: no chunk is read


def test_probing_finds_any_size_with_few_reads(tmp_path: Any) -> None:
    from streaming_litdata.sizes import WINDOW, local_reader, probe_size, window_for, zstd_bound
    path = tmp_path / 'f.zstd.bin'
    count = [0]
    local = local_reader(str(tmp_path))

    def read(name: str, start: int, length: int) -> bytes:
        count[0] += 1
        return local(name, start, length)
    for size in (0, 1, 63, 64, 65, 1000, 4097):
        path.write_bytes(b'x' * size)
        count[0] = 0
        assert probe_size(read, 'f.zstd.bin', 4200, 'here', window=64) == size
        assert count[0] <= 8  # log2(4200 / 64) bisection reads and one window read
    assert zstd_bound(1000) == 1000 + 3 + ((128 << 10) - 1000 >> 11) and zstd_bound(1 << 20) == (1 << 20) + 4096
    with pytest.raises(IndexFormatError, match=r'here: f\.zstd\.bin has more than 4000 bytes'):
        probe_size(read, 'f.zstd.bin', 4000, 'here', window=64)
    with pytest.raises(FileNotFoundError):
        probe_size(read, 'absent.zstd.bin', 4000, 'here')
    count[0] = 0  # storage without ranged reads: one whole read
    assert probe_size(read, 'f.zstd.bin', 1 << 20, 'here', window=window_for('gs://bucket/data')) == 4097
    assert count[0] == 1
    assert window_for('/data/set') == window_for('s3://b/p') == window_for('https://h/p') == WINDOW


def test_a_chunk_litdata_decompressed_in_place_reads_and_a_missing_one_is_named(tmp_path: Any) -> None:
    """litdata's own reader leaves a local dataset with chunk-R-N.bin in place of chunk-R-N.zstd.bin."""
    from make_golden import canonical
    zstandard = _zstd()
    data = _copy(tmp_path)
    zipped = os.path.join(data, 'chunk-0-1.zstd.bin')
    with open(zipped, 'rb') as handle, open(os.path.join(data, 'chunk-0-1.bin'), 'wb') as out:
        out.write(zstandard.ZstdDecompressor().decompress(handle.read()))
    os.remove(zipped)
    assert [canonical(item) for item in StreamingDataset(local=data, batch_size=4)] == _expected()
    other = _copy(tmp_path, 'incomplete')
    os.remove(os.path.join(other, 'chunk-0-2.zstd.bin'))
    with pytest.raises(IndexFormatError, match=r'chunk 2, chunk-0-2\.zstd\.bin, is missing \(and no decompressed '
                                               r'chunk-0-2\.bin of 8526 bytes is beside it\)'):
        StreamingDataset(local=other, batch_size=4)


def _new_version(root: str) -> None:
    """Write chunk-0-1 of a new version over ``root``'s (``item `` renamed ``NEW! ``: the same sizes and index.json,
    other names), as ``rsync -a`` does: a new file renamed into place, with an older modification time."""
    zstandard = _zstd()
    zipped = os.path.join(root, 'chunk-0-1.zstd.bin')
    with open(zipped, 'rb') as handle:
        plain = zstandard.ZstdDecompressor().decompress(handle.read())
    new = plain.replace(b'item ', b'NEW! ')
    assert len(new) == len(plain) and new != plain
    with open(zipped + '.part', 'wb') as handle:
        handle.write(zstandard.ZstdCompressor().compress(new))
    os.utime(zipped + '.part', (1_000_000_000, 1_000_000_000))
    os.replace(zipped + '.part', zipped)


def test_a_chunk_replaced_in_place_is_decompressed_again(tmp_path: Any, capsys: Any) -> None:
    """A local dataset read in place has decompressed copies beside its ``.zstd.bin`` chunks; a chunk synced over
    (then ``chmod -R``, which gives the old copy a newer change time) is decompressed again by the reader and by
    ``streaming convert litdata``, never taken from the copy of the version before."""
    from make_golden import canonical

    from streaming_core.cli import main
    data = _copy(tmp_path)
    old = [canonical(item) for item in StreamingDataset(local=data, batch_size=4)]
    assert old == _expected() and os.path.isfile(os.path.join(data, 'chunk-0-1.bin'))
    _new_version(data)
    for name in os.listdir(data):
        os.chmod(os.path.join(data, name), 0o644)
    assert main(['convert', 'litdata', data, str(tmp_path / 'mds'), '--quiet']) == 0
    for dataset in (StreamingDataset(local=data, batch_size=4), StreamingDataset(local=str(tmp_path / 'mds'),
                                                                                 batch_size=4)):
        names = [item['name'] for item in dataset]
        changed = [i for i, (a, b) in enumerate(zip(names, (o['name'] for o in old))) if a != b]
        assert changed and all(names[i].startswith('NEW! ') for i in changed)
        assert not any(name.startswith('item ') for name in (names[i] for i in changed))


def _corruption(err: BaseException) -> ShardCorruptError:
    """The ShardCorruptError ``err`` is or was raised from (the core reports a shard it cannot prepare as a
    ShardPrepareError raised from the decompressor's ShardCorruptError)."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, ShardCorruptError):
        cause = cause.__cause__
    assert cause is not None, f'no ShardCorruptError behind {err!r}'
    return cause


def _damage(path: str, how: str) -> None:
    zstandard = _zstd()
    with open(path, 'rb') as handle:
        data = handle.read()
    if how == 'truncated':
        data = data[:len(data) // 2]
    elif how == 'garbage':
        data = data[:8] + bytes(len(data) - 8)
    else:
        plain = zstandard.ZstdDecompressor().decompress(data)
        plain = plain[:-10] if how == 'short' else plain + bytes(50_000)
        data = zstandard.ZstdCompressor(write_content_size=how == 'bomb').compress(plain)
    with open(path, 'wb') as handle:
        handle.write(data)


@pytest.mark.parametrize('how, message', [
    ('truncated', r'zstd data is truncated'),
    ('garbage', r'zstd data is corrupt'),
    ('bomb', r'declares 58526 bytes past the declared size of 8526 bytes'),
    ('bomb-undeclared', r'expands past the declared size of 8526 bytes'),
    ('short', r'decompresses to 8516 bytes, but the index declares 8526 for chunk-0-2\.bin'),
])
def test_a_damaged_zstd_chunk_is_corrupt_naming_it(tmp_path: Any, how: str, message: str) -> None:
    data = _copy(tmp_path)
    path = os.path.join(data, 'chunk-0-2.zstd.bin')
    _damage(path, how)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert dataset[0]['id'] == 0  # the other chunks read
    with pytest.raises((ShardCorruptError, OSError)) as caught:
        dataset[39]
    corrupt = _corruption(caught.value)
    assert re.search(message, str(corrupt)), corrupt
    assert 'chunk-0-2.zstd.bin' in str(corrupt) and 'chunk-0-2' in str(caught.value)
    assert not os.path.exists(os.path.join(data, 'chunk-0-2.bin'))  # never a partial decompressed chunk


def test_a_remote_directory_downloads_decompresses_and_keeps_the_zip_when_asked(tmp_path: Any) -> None:
    from make_golden import canonical
    remote = _copy(tmp_path, 'remote')
    dropped, kept = str(tmp_path / 'dropped'), str(tmp_path / 'kept')
    expected = _expected()
    assert [canonical(s) for s in StreamingDataset(remote=remote, local=dropped, batch_size=4)] == expected
    assert [canonical(s) for s in StreamingDataset(remote=remote, local=kept, batch_size=4, keep_zip=True)] == \
        expected
    for chunk in CHUNKS:
        assert os.path.exists(os.path.join(dropped, f'{chunk}.bin'))
        assert not os.path.exists(os.path.join(dropped, f'{chunk}.zstd.bin'))
        assert os.path.exists(os.path.join(kept, f'{chunk}.zstd.bin'))


BUCKET = 'streaming-litdata-zstd'


@pytest.fixture
def s3_env(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch) -> Any:
    yield from moto_bucket(moto_server, cloud_env, BUCKET)


@pytest.mark.slow
def test_over_s3_shuffled_with_two_workers_under_an_evicting_cache_limit(tmp_path: Any, s3_env: Any) -> None:
    """The limit has room for one chunk being prepared (its ``.zstd.bin`` and decompressed copy) and nothing else, so
    chunks are evicted and fetched again as the two workers move between them.

    Each worker reads exactly one batch (20 of the 40 samples), so neither sits idle with a chunk open while the other
    works. A worker that has handed its batches over and waits for the main process keeps its open chunk pinned,
    and the main process waits for the sibling's batch in order: when that batch needs the pinned room, nothing
    frees it and the sibling fails with CacheLimitError after its patience (with ``batch_size=4`` this failed 1 run
    in 9, and every time when the second worker starts 2 s late). A cache limit must hold what every worker keeps
    open plus one chunk being prepared.
    """
    from make_golden import canonical
    prefix = f'ds-{uuid.uuid4().hex}'
    source = os.path.join(GOLDEN, NAME)
    for name in sorted(os.listdir(source)):
        s3_env.upload_file(os.path.join(source, name), BUCKET, f'{prefix}/{name}')
    sizes = _chunk_bytes(source)
    largest = max(sizes[f'{c}.zstd.bin'] + os.path.getsize(os.path.join(source, f'{c}.zstd.bin')) for c in CHUNKS)
    cache = str(tmp_path / 'cache')
    limit = os.path.getsize(os.path.join(source, 'index.json')) + largest + 64  # room for one chunk at a time
    with pytest.warns(UserWarning, match=r'below four times the largest shard'):
        dataset = StreamingDataset(remote=f's3://{BUCKET}/{prefix}', local=cache, batch_size=20, shuffle=True,
                                   shuffle_block_size=16, cache_limit=limit)
    assert len(dataset) == 40
    loader = StreamingDataLoader(dataset, batch_size=20, num_workers=2, collate_fn=lambda batch: batch)
    batches = list(loader)
    assert [len(batch) for batch in batches] == [20, 20]  # one batch per worker
    seen = [item for batch in batches for item in batch]
    assert sorted(item['id'] for item in seen) == list(range(40))
    assert [item['id'] for item in seen] != list(range(40))
    expected = _expected()
    for item in seen:
        assert canonical(item) == expected[item['id']], f'item {item["id"]}'
    present = [name for name in os.listdir(cache) if name.startswith('chunk-')]
    assert not [name for name in present if name.endswith('.zstd.bin')]  # decompressed, then dropped
    assert len(present) < len(CHUNKS)  # evicted: never all three decompressed chunks at once
    assert sum(os.path.getsize(os.path.join(cache, name)) for name in present) <= largest + 64


def test_convert_and_verify_read_whole_file_zstd_chunks(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from streaming_core.cli import main
    data = _copy(tmp_path)
    before = sorted(os.listdir(data))
    out = str(tmp_path / 'mds')
    assert main(['convert', 'litdata', data, out, '--quiet']) == 0
    assert [s['id'] for s in StreamingDataset(local=out, batch_size=4)] == list(range(40))
    assert main(['verify', data]) == 0
    assert sorted(os.listdir(data)) == before  # converting and verifying leave the directory as it was
    with open(os.path.join(data, 'chunk-0-1.zstd.bin'), 'r+b') as handle:
        handle.truncate(2000)
    capsys.readouterr()
    assert main(['verify', data]) != 0
    assert re.search(r'BAD shard 1 \(chunk-0-1\.bin\): chunk-0-1\.zstd\.bin: .*zstd data is truncated',
                     capsys.readouterr().out)
    assert main(['convert', 'litdata', data, str(tmp_path / 'mds2'), '--quiet']) != 0
    assert re.search(r'error: .*/chunk-0-1\.zstd\.bin: zstd data is truncated', capsys.readouterr().err)


def test_a_compression_level_in_the_name_is_part_of_the_file_suffix(tmp_path: Any) -> None:
    """``optimize(compression='zstd:4', compression_level='chunk')`` names its chunks ``chunk-R-N.zstd:4.bin``."""
    from make_golden import canonical
    data = _copy(tmp_path)
    with open(os.path.join(data, 'index.json')) as handle:
        obj = json.load(handle)
    obj['config']['compression'] = 'zstd:4'
    for chunk in obj['chunks']:
        renamed = chunk['filename'].replace('.zstd.bin', '.zstd:4.bin')
        os.rename(os.path.join(data, chunk['filename']), os.path.join(data, renamed))
        chunk['filename'] = renamed
    with open(os.path.join(data, 'index.json'), 'w') as handle:
        json.dump(obj, handle)
    dataset = StreamingDataset(local=data, batch_size=4)
    assert [canonical(item) for item in dataset] == _expected()
    assert os.path.getsize(os.path.join(data, 'chunk-0-2.bin')) == 8526
