"""A warm construction (the binary index of the index version present) reads no byte of ``index.json``: the index
version is known from the file's stat (or the record and the remote's stat), and a changed ``index.json`` is still
noticed (issue 15)."""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import IndexFormatError
from streaming_core.reading.index_sync import IndexChangedError, SyncedIndex
from tests.fixtures.data import ids_of, sample, write_mds


@contextmanager
def _opens_of(path: str) -> Iterator[list[str]]:
    """Record every ``open`` of ``path`` (by any module) while the block runs."""
    real_open = builtins.open
    target = os.path.realpath(path)
    seen: list[str] = []

    def recording_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(file, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(file)) == target:
            seen.append(os.fsdecode(file))
        return real_open(file, *args, **kwargs)

    builtins.open = recording_open
    try:
        yield seen
    finally:
        builtins.open = real_open


def _scramble_keeping_stat(path: str) -> None:
    """Overwrite ``path`` in place with bytes that are not an index, keeping its size, inode and mtime: only a
    reader of its content can tell."""
    info = os.stat(path)
    with open(path, 'r+b') as handle:
        handle.write(b'#' * info.st_size)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns, os.stat(path).st_ino) == \
        (info.st_size, info.st_mtime_ns, info.st_ino)


def test_a_warm_local_construction_reads_no_byte_of_index_json(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    index = os.path.join(local, 'index.json')
    with _opens_of(index) as cold_opens:
        first = StreamingDataset(local=local, batch_size=1)
    assert first.catalogue.sources[0].built_here and cold_opens  # cold: parsed once
    with _opens_of(index) as warm_opens:
        warm = StreamingDataset(local=local, batch_size=1)
    assert warm_opens == []
    assert not warm.catalogue.sources[0].built_here
    _scramble_keeping_stat(index)  # content gone, stat kept: a warm start never notices
    again = StreamingDataset(local=local, batch_size=1)
    assert not again.catalogue.sources[0].built_here
    assert again.streams[0].index_identity == first.streams[0].index_identity
    assert [again[i] for i in range(40)] == [sample(i) for i in range(40)]


def test_a_changed_local_index_json_is_still_noticed(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 30, size_limit=300)
    index = os.path.join(local, 'index.json')
    first = StreamingDataset(local=local, batch_size=1)
    write_mds(local, 50, start=100, size_limit=300, exist_ok=True)  # new size and mtime
    new = StreamingDataset(local=local, batch_size=1)
    assert new.catalogue.sources[0].built_here
    assert new.streams[0].index_identity != first.streams[0].index_identity
    assert ids_of(new) == list(range(100, 150))
    info = os.stat(index)
    os.utime(index, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))  # same size, newer mtime
    with _opens_of(index) as opens:
        touched = StreamingDataset(local=local, batch_size=1)
    assert opens  # another identity: read (and converted) again
    assert touched.catalogue.sources[0].built_here
    assert ids_of(touched) == list(range(100, 150))


def test_a_warm_construction_with_a_remote_reads_no_byte_of_the_local_copy(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 40, size_limit=300)
    local = str(tmp_path / 'local')
    first = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert first.catalogue.sources[0].built_here
    copy = os.path.join(local, 'index.json')
    with _opens_of(copy) as opens:
        warm = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert opens == [] and not warm.catalogue.sources[0].built_here
    _scramble_keeping_stat(copy)
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == list(range(40))
    write_mds(remote, 20, start=500, size_limit=300, exist_ok=True)  # the remote changes: noticed by its stat
    new = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert new.catalogue.sources[0].built_here
    assert ids_of(new) == list(range(500, 520))


def test_a_warm_in_place_construction_reads_no_byte_of_index_json(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    StreamingDataset(remote=local, local=local, batch_size=1)
    with _opens_of(os.path.join(local, 'index.json')) as opens:
        warm = StreamingDataset(remote=local, local=local, batch_size=1)
    assert opens == [] and not warm.catalogue.sources[0].built_here
    assert ids_of(warm) == list(range(40))


def test_a_damaged_binary_index_is_rebuilt_from_the_unread_index(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    first = StreamingDataset(local=local, batch_size=1)
    path = first.catalogue.sources[0].path
    with open(path, 'r+b') as handle:
        handle.truncate(os.path.getsize(path) - 8)
    again = StreamingDataset(local=local, batch_size=1)  # warm by stat, so the bytes are read only now
    assert again.catalogue.sources[0].built_here
    assert ids_of(again) == list(range(40))


def test_unread_bytes_are_checked_against_the_stat_they_were_vouched_by(tmp_path):
    path = str(tmp_path / 'index.json')
    with open(path, 'wb') as handle:
        handle.write(b'{"shards": [], "version": 2}')
    info = os.stat(path)
    stat = (info.st_size, info.st_mtime_ns, info.st_ino)
    assert SyncedIndex(path, None, 'file:x', stat).data == b'{"shards": [], "version": 2}'
    with pytest.raises(IndexChangedError, match='index.json changed'):
        _ = SyncedIndex(path, None, 'file:x', (stat[0] + 1, stat[1], stat[2])).data
    os.remove(path)
    with pytest.raises(IndexChangedError, match='construct the dataset again'):
        _ = SyncedIndex(path, None, 'file:x', stat).data
    with pytest.raises(ValueError):
        SyncedIndex(path, None, 'file:x')


def test_format_limits_are_checked_from_build_time_statistics(tmp_path, monkeypatch):
    from streaming_core.reading.index_file import load_index
    from streaming_core.reading.shard_table import ShardTable
    from streaming_mds.reader import MAX_SHARD_BYTES
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    scans: list[int] = []
    real_scan = ShardTable._scan_limits

    def spy(self, cls, tid):  # type: ignore[no-untyped-def]
        scans.append(tid)
        return real_scan(self, cls, tid)

    monkeypatch.setattr(ShardTable, '_scan_limits', spy)
    StreamingDataset(local=local, batch_size=1)
    StreamingDataset(local=local, batch_size=1)
    assert scans == []  # a valid index: no pass over the per-shard arrays
    path = os.path.join(local, 'index.json')
    original = json.dumps(load_index(path))
    for shard, field, value, message in [(4, 'samples', 10 ** 6, r'shard 4.*cannot fit'),
                                         (2, 'bytes', MAX_SHARD_BYTES + 1, r'shard 2')]:
        index = json.loads(original)
        index['shards'][-1]['size_limit'] = 12345  # a second template: the bad shard is found among its own
        if field == 'samples':
            index['shards'][shard]['samples'] = value
        else:
            index['shards'][shard]['raw_data']['bytes'] = value
        with open(path, 'w') as handle:
            json.dump(index, handle)
        for _ in range(2):  # built, then mapped: refused both times
            with pytest.raises(IndexFormatError, match=message):
                StreamingDataset(local=local, batch_size=1)
    assert scans
