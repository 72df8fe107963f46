"""A warm construction (the binary index of the index version present) reads no byte of ``index.json``: the index
version is known from the file's stat (or the record and the remote's stat), and a changed ``index.json`` is still
noticed (issue 15)."""

from __future__ import annotations

import builtins
import json
import os
import re
import time
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


def _rewrite_keeping_stat(path: str, data: bytes) -> None:
    """Overwrite ``path`` in place with ``data`` (of its size), then give it its old modification time back, as
    ``cp -p``, ``rsync -t --inplace`` or ``touch -r`` do: its size, inode and mtime are the old ones (its change time
    is not: no call sets it)."""
    info = os.stat(path)
    assert len(data) == info.st_size
    time.sleep(0.05)  # past the file system's timestamp granularity (a few ms): a change within it is invisible
    with open(path, 'r+b') as handle:
        handle.write(data)
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
    assert [warm[i] for i in range(40)] == [sample(i) for i in range(40)]


@pytest.mark.parametrize('where', ['local', 'remote'])
def test_an_index_rewritten_in_place_with_its_old_size_and_mtime_is_noticed(tmp_path, where):
    """Another list of shards, of the same length, written over index.json and its mtime restored: the binary index
    of the old list must not be used (the file's change time tells them apart), read in place or as a remote."""
    source = write_mds(str(tmp_path / 'ds'), 120, size_limit=300)
    index = os.path.join(source, 'index.json')
    place = {'local': source} if where == 'local' else {'remote': source, 'local': str(tmp_path / 'cache')}
    whole = json.loads(open(index).read())
    shards = whole['shards']
    assert len(shards) >= 12 and len({json.dumps(s) for s in shards[:6]}) == 6
    first_half = json.dumps({**whole, 'shards': shards[:6]}).encode()
    second_half = json.dumps({**whole, 'shards': shards[6:12]}).encode()
    assert len(first_half) == len(second_half)
    with open(index, 'wb') as handle:
        handle.write(first_half)
    old = StreamingDataset(**place, batch_size=1)
    before = sum(s['samples'] for s in shards[:6])
    assert ids_of(old) == list(range(before))
    _rewrite_keeping_stat(index, second_half)
    new = StreamingDataset(**place, batch_size=1)
    assert new.streams[0].index_identity != old.streams[0].index_identity
    after = sum(s['samples'] for s in shards[6:12])
    assert ids_of(new) == list(range(before, before + after))
    assert new.catalogue.sources[0].built_here
    _rewrite_keeping_stat(index, b'#' * len(second_half))  # no longer an index: refused, not served from the past
    with pytest.raises(IndexFormatError, match='index.json'):
        StreamingDataset(**place, batch_size=1)


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
    _rewrite_keeping_stat(copy, b'#' * os.path.getsize(copy))  # the local copy damaged: refreshed from the remote
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == list(range(40))
    assert open(copy, 'rb').read() == open(os.path.join(remote, 'index.json'), 'rb').read()
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
    stat = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    assert SyncedIndex(path, None, 'file:x', stat).data == b'{"shards": [], "version": 2}'
    with pytest.raises(IndexChangedError, match='index.json changed'):
        _ = SyncedIndex(path, None, 'file:x', (stat[0] + 1, stat[1], stat[2], stat[3])).data
    with pytest.raises(IndexChangedError, match='index.json changed'):
        _ = SyncedIndex(path, None, 'file:x', (stat[0], stat[1], stat[2], stat[3] - 1)).data
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


def test_a_remote_rewritten_between_the_probe_and_the_download_is_not_labelled_with_the_probe(tmp_path, monkeypatch):
    """The remote index's stat is taken before the index lock; when the remote changes before the download, the bytes
    read are of another version than the stat names: they are read again under the stat taken after the download
    (the version a job can watch; a digest cannot be compared with the remote's stat), never labelled with the first
    stat, and the next construction reuses them."""
    from streaming_core.reading import index_sync
    remote = write_mds(str(tmp_path / 'remote'), 30, size_limit=300)
    local = str(tmp_path / 'local')
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == list(range(30))
    real_probe = index_sync._probe
    rewritten = []

    def probe_then_rewrite(stream, url, **kwargs):  # type: ignore[no-untyped-def]
        found = real_probe(stream, url, **kwargs)
        if not rewritten:  # another job rewrites the remote right after this process's probe
            rewritten.append(write_mds(remote, 45, start=200, size_limit=300, exist_ok=True))
        return found

    write_mds(remote, 40, start=100, size_limit=300, exist_ok=True)
    monkeypatch.setattr(index_sync, '_probe', probe_then_rewrite)
    caught = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert rewritten and ids_of(caught) == list(range(200, 245))
    first = caught.streams[0].index_identity
    assert first.startswith('stat:') and first == real_probe(caught.streams[0], os.path.join(remote, 'index.json'))
    monkeypatch.setattr(index_sync, '_probe', real_probe)
    later = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert ids_of(later) == list(range(200, 245))
    assert later.streams[0].index_identity.startswith('stat:')


@pytest.mark.parametrize('trouble', ['rewritten again during the check', 'second stat fails'])
def test_a_rewrite_with_identical_index_bytes_is_seen_whatever_names_the_bytes_read(tmp_path, monkeypatch, trouble):
    """The remote's stat changed since the cache was filled, its index bytes did not (same sizes, no hashes): the
    cached shards are stale. That holds even when the bytes read end up identified by their digest (the remote
    changed again between the probe and the download, and is read again under its new stat; or it could not be
    stat'ed again, and the bytes are identified by their digest)."""
    from streaming_core.reading import index_sync
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    index = os.path.join(remote, 'index.json')
    write_mds(remote, 30, start=100, size_limit=300)
    first = open(index, 'rb').read()
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == list(range(100, 130))
    write_mds(remote, 30, start=200, size_limit=300, exist_ok=True)
    assert open(index, 'rb').read() == first  # same sample sizes: the same index bytes
    real_probe = index_sync._probe
    calls = []

    def probe(stream, url, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(url)
        if trouble == 'second stat fails' and len(calls) > 1:
            return None
        found = real_probe(stream, url, **kwargs)
        if trouble != 'second stat fails' and len(calls) == 1:  # another job rewrites the remote right then
            write_mds(remote, 30, start=300, size_limit=300, exist_ok=True)
        return found

    monkeypatch.setattr(index_sync, '_probe', probe)
    expected = list(range(300, 330)) if trouble != 'second stat fails' else list(range(200, 230))
    caught = StreamingDataset(remote=remote, local=local, batch_size=1)
    kind = 'sha256:' if trouble == 'second stat fails' else 'stat:'
    assert len(calls) == (2 if trouble == 'second stat fails' else 3)
    assert caught.streams[0].index_identity.startswith(kind)
    assert ids_of(caught) == expected
    monkeypatch.setattr(index_sync, '_probe', real_probe)
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == expected


def test_a_record_without_the_change_time_is_the_same_version(tmp_path):
    """A cache filled by a version whose local-remote identities lacked the change time: the same remote is not
    taken for a rewritten one (which would remove every cached shard without a hash)."""
    from streaming_core.common.paths import state_dir
    from streaming_core.reading.cache_record import read_record, write_record
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 30, size_limit=300)
    assert ids_of(StreamingDataset(remote=remote, local=local, batch_size=1)) == list(range(30))
    record = read_record(state_dir(local))
    assert ';ctime=' in record.source_identity
    old = re.sub(r';ctime=\d+', '', record.source_identity)
    record.source_identity = old
    write_record(state_dir(local), record)
    shards = sorted(name for name in os.listdir(local) if name.startswith('shard.'))
    inodes = [os.stat(os.path.join(local, name)).st_ino for name in shards]
    again = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert ids_of(again) == list(range(30))
    assert [os.stat(os.path.join(local, name)).st_ino for name in shards] == inodes  # kept, not downloaded again
