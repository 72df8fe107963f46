"""Errors reach the training loop, naming the shard, the remote and the cause; nothing ends an epoch silently."""

from __future__ import annotations

import json
import os

import pytest
from torch.utils.data import DataLoader

from streaming_core import StreamingDataset
from streaming_core.errors import HashMismatchError, ShardCorruptError
from streaming_core.reading.shard_manager import ShardPrepareError
from tests.fixtures.data import write_mds


def _first_shard(remote):
    with open(os.path.join(remote, 'index.json')) as handle:
        return json.load(handle)['shards'][1]


def test_missing_remote_shard_raises_in_the_loop(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60)
    name = _first_shard(remote)['raw_data']['basename']
    os.remove(os.path.join(remote, name))
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2, download_retry=1)
    seen = []
    with pytest.raises(ShardPrepareError) as info:
        for sample in dataset:
            seen.append(sample['id'])
    message = str(info.value)
    assert name in message and remote in message and 'not found' in message.lower()
    assert seen == list(range(len(seen))) and len(seen) < 60  # the samples before the bad shard, then the error


def test_missing_shard_raises_through_dataloader_workers(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60)
    name = _first_shard(remote)['raw_data']['basename']
    os.remove(os.path.join(remote, name))
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2, download_retry=0)
    with pytest.raises(Exception) as info:
        for _ in DataLoader(dataset, batch_size=2, num_workers=2):
            pass
    assert name in str(info.value)
    info.value.__traceback__ = None  # release the loader's iterator now (see _from_a_worker in streaming-compat)
    del info


def test_hash_mismatch_names_the_file(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60, hashes=['sha1'])
    entry = _first_shard(remote)
    path = os.path.join(remote, entry['raw_data']['basename'])
    data = bytearray(open(path, 'rb').read())
    data[-1] ^= 0xFF  # same size, different content
    open(path, 'wb').write(bytes(data))
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2, validate_hash='sha1',
                               download_retry=1)
    with pytest.raises(ShardPrepareError) as info:
        list(dataset)
    assert isinstance(info.value.__cause__, HashMismatchError)
    assert 'Checksum failure' in str(info.value) and entry['raw_data']['basename'] in str(info.value)


def test_unknown_validate_hash_is_refused_at_construction(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 10)
    with pytest.raises(LookupError, match='sha257'):
        StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1, validate_hash='sha257')


def test_corrupt_local_shard_raises_naming_the_file(tmp_path):
    path = write_mds(str(tmp_path / 'ds'), 60)
    entry = _first_shard(path)
    shard = os.path.join(path, entry['raw_data']['basename'])
    data = bytearray(open(shard, 'rb').read())
    data[8:12] = (0xFFFFFF).to_bytes(4, 'little')  # an offset far past the end of the file
    open(shard, 'wb').write(bytes(data))
    dataset = StreamingDataset(local=path, batch_size=2)
    with pytest.raises(ShardCorruptError) as info:
        list(dataset)
    assert entry['raw_data']['basename'] in str(info.value)


def test_truncated_compressed_shard_is_an_error(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 60, compression='zstd')
    entry = _first_shard(remote)
    path = os.path.join(remote, entry['zip_data']['basename'])
    data = open(path, 'rb').read()
    open(path, 'wb').write(data[: len(data) // 2])
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=2, download_retry=0)
    with pytest.raises(ShardPrepareError) as info:
        list(dataset)
    assert entry['zip_data']['basename'] in str(info.value)


def test_bad_sample_policy_replaces_and_keeps_the_step_count(tmp_path, caplog):
    from streaming_mds import MDSWriter
    path = str(tmp_path / 'ds')
    with MDSWriter(out=path, columns={'id': 'int', 'text': 'str'}, size_limit=None) as writer:
        for i in range(20):
            writer.write({'id': i, 'text': f'sample {i}'})
    shard = os.path.join(path, 'shard.00000.mds')
    data = bytearray(open(shard, 'rb').read())
    where = data.index(b'sample 7')
    data[where:where + 2] = b'\xff\xfe'  # invalid UTF-8 inside sample 7 only
    open(shard, 'wb').write(bytes(data))
    with pytest.raises((UnicodeDecodeError, ShardCorruptError)):
        list(StreamingDataset(local=path, batch_size=1))
    replacing = StreamingDataset(local=path, batch_size=1, on_bad_sample='replace')
    replaced = list(replacing)
    with pytest.raises(ShardCorruptError):  # reading.md: random access has no neighbour to give instead
        replacing[7]
    assert len(replaced) == 20
    assert [s['id'] for s in replaced] == [0, 1, 2, 3, 4, 5, 6, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    assert 'Replacing bad sample 7 of shard shard.00000.mds' in caplog.text
    with pytest.raises(ValueError, match='on_bad_sample'):
        StreamingDataset(local=path, batch_size=1, on_bad_sample='skip')
