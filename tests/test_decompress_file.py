"""Decompressing a downloaded shard file: gzip and bzip2 stream a chunk at a time, in bounded memory, bounded in
size, and refuse truncated or padded-with-garbage files; other families fall back to memory."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from streaming_core.errors import ShardCorruptError
from streaming_core.storage.compression import compress, decompress, decompress_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, data):
    with open(path, 'wb') as handle:
        handle.write(data)
    return str(path)


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_streamed_file_equals_the_whole_decompression(tmp_path, family):
    data = os.urandom(3 << 20) + bytes(5 << 20)  # more than one read and one output chunk
    packed = compress(family, data) + compress(family, b'second member')
    src = _write(tmp_path / f'x.{family}', packed)
    written = decompress_file(family, src, str(tmp_path / 'out'), max_size=len(data) + 13)
    assert written == len(data) + 13
    assert (tmp_path / 'out').read_bytes() == decompress(family, packed) == data + b'second member'


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_a_truncated_file_is_corrupt(tmp_path, family):
    packed = compress(family, os.urandom(1 << 20))
    src = _write(tmp_path / 'x', packed[:len(packed) // 2])
    with pytest.raises(ShardCorruptError, match='truncated'):
        decompress_file(family, src, str(tmp_path / 'out'))


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_output_past_the_bound_is_refused(tmp_path, family):
    src = _write(tmp_path / 'x', compress(family, bytes(4 << 20)))
    with pytest.raises(ShardCorruptError, match='expands past the declared size of 1000 bytes'):
        decompress_file(family, src, str(tmp_path / 'out'), max_size=1000)
    assert os.path.getsize(tmp_path / 'out') <= (1 << 24)


def test_gzip_padding_is_accepted_and_garbage_after_it_refused(tmp_path):
    packed = gzip.compress(b'payload')
    ok = _write(tmp_path / 'ok.gz', packed + bytes(2048))
    assert decompress_file('gz', ok, str(tmp_path / 'out')) == 7
    bad = _write(tmp_path / 'bad.gz', packed + bytes(2048) + b'junk')
    with pytest.raises(ShardCorruptError):
        decompress_file('gz', bad, str(tmp_path / 'out'))


def test_a_family_without_streaming_falls_back_to_memory(tmp_path):
    data = os.urandom(100_000)
    src = _write(tmp_path / 'x.zstd', compress('zstd', data))
    assert decompress_file('zstd', src, str(tmp_path / 'out'), max_size=len(data)) == len(data)
    assert (tmp_path / 'out').read_bytes() == data


_CHILD = '''
import json, sys, resource
from streaming_core.storage.compression import decompress_file
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
written = decompress_file(sys.argv[1], sys.argv[2], sys.argv[3], max_size=int(sys.argv[4]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({'written': written, 'growth_kb': after - before}))
'''


def test_a_large_file_decompresses_in_bounded_memory(tmp_path):
    # gzip (the .tar.gz case); bzip2 goes through the same stream_members loop, and writing 400 MB of it is slow.
    family, size = 'gz', 400 << 20
    src = tmp_path / f'big.{family}'
    block = bytes(range(256)) * 4096  # 1 MiB, compresses well
    with gzip.open(src, 'wb') as handle:
        for _ in range(size // len(block)):
            handle.write(block)
    done = subprocess.run([sys.executable, '-c', _CHILD, family, str(src), str(tmp_path / 'out'), str(size)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found['written'] == size == os.path.getsize(tmp_path / 'out')
    assert found['growth_kb'] < 100 * 1024, f'peak memory grew by {found["growth_kb"] / 1024:.0f} MB'


def test_a_corrupt_compressed_shard_is_a_shard_corrupt_error_naming_it(tmp_path):
    from streaming_core import StreamingDataset
    from streaming_core.reading.shard_manager import ShardPrepareError
    from tests.fixtures.data import write_mds
    remote = write_mds(str(tmp_path / 'remote'), 40, compression='gz', size_limit=1 << 10)
    victim = sorted(name for name in os.listdir(remote) if name.endswith('.gz'))[0]
    packed = (tmp_path / 'remote' / victim).read_bytes()
    (tmp_path / 'remote' / victim).write_bytes(packed[:20] + bytes(len(packed) - 20))  # same size, bad deflate data
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4)
    with pytest.raises(ShardCorruptError, match=victim) as caught:
        dataset[0]
    assert isinstance(caught.value, ShardPrepareError)
