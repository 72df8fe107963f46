"""An idle reader gives up its pins when another reader of the node is short of cache room.

A DataLoader worker waiting for the main process is suspended inside the dataset's generator, holding pins on the
shards of its keep window; it cannot release them itself. Before this, another process that needed room waited until
the cache's timeout and failed with ``CacheLimitError`` (seen in a loaded CI run of the exactly-once test). Here
process A reads a few samples and stops (its generator suspended, its pins held) while process B, on the same cache
with room for about as much as A holds, reads a whole epoch: B finishes quickly, then A finishes its epoch, and both
read every sample exactly once, in the order of an uninterrupted run. A pause 2 samples before the end of A's epoch,
once its prefetcher has handled every run, is the case two DataLoader workers met at the end of each epoch (a
``return`` inside the prefetcher's ``try`` skipped the loop that gives pins up after the last run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from streaming_core import StreamingDataset
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

READER = '''
import json, os, sys, time
from streaming_core import StreamingDataset
remote, local, limit, out, pause, go, pause_at = sys.argv[1:8]
dataset = StreamingDataset(remote=remote, local=local, cache_limit=int(limit), batch_size=4, shuffle=True,
                           shuffle_seed=9, predownload=64, download_timeout=5, download_retry=0)
samples = iter(dataset)
ids = []
started = time.monotonic()
for sample in samples:
    ids.append(int(sample['id']))
    if pause != '-' and len(ids) == int(pause_at):  # its keep window then pins the room
        open(pause, 'w').close()                    # suspended here, holding its pins
        while not os.path.exists(go):
            time.sleep(0.05)
with open(out, 'w') as handle:
    json.dump({'ids': ids, 'seconds': time.monotonic() - started}, handle)
'''


def _start(script: str, *args: str, cache_root: str) -> subprocess.Popen:
    env = dict(os.environ, STREAMING_CORE_CACHE_DIR=cache_root, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, '-c', script, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait(path: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc.poll() is not None:
            raise AssertionError(f'reader exited {proc.returncode}: {proc.stderr.read()[-3000:]}')
        assert time.monotonic() < deadline, f'{path} did not appear in {timeout} s'
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize('pause_at, room', [
    (42, 8),    # early in the epoch: its keep window pins 8 shards of 991 bytes
    (478, 3),   # 2 samples before its end: its prefetcher has handled every run of the epoch and only waits
])
def test_an_idle_reader_gives_its_pins_to_a_reader_short_of_room(tmp_path, pause_at, room) -> None:
    remote = write_mds(str(tmp_path / 'remote'), 480, size_limit=1 << 10, sample_size=64)  # ~40 shards of ~1 KB
    probe = StreamingDataset(remote=remote, local=str(tmp_path / 'probe'), batch_size=4, shuffle=True,
                             shuffle_seed=9)
    expected = [int(s['id']) for s in probe]
    largest = max(r.max_size for r in probe.shard_manager.readers)
    limit = probe._index_bytes + room * largest            # room for `room` shards on the node
    script = textwrap.dedent(READER)
    cache_root, local = str(tmp_path / 'root'), str(tmp_path / 'cache')
    paused, go = str(tmp_path / 'paused'), str(tmp_path / 'go')
    a = _start(script, remote, local, str(limit), str(tmp_path / 'a.json'), paused, go, str(pause_at),
               cache_root=cache_root)
    try:
        _wait(paused, a, 120)
        b = _start(script, remote, local, str(limit), str(tmp_path / 'b.json'), '-', '-', '0', cache_root=cache_root)
        _, b_err = b.communicate(timeout=120)
        assert b.returncode == 0, b_err[-3000:]
        open(go, 'w').close()
        _, a_err = a.communicate(timeout=120)
        assert a.returncode == 0, a_err[-3000:]
    finally:
        for proc in (a,):
            if proc.poll() is None:
                proc.kill()
    with open(tmp_path / 'a.json') as handle:
        first = json.load(handle)
    with open(tmp_path / 'b.json') as handle:
        second = json.load(handle)
    assert first['ids'] == expected and second['ids'] == expected
    assert second['seconds'] < 20, f'the reader short of room waited {second["seconds"]:.0f} s for the idle one'


RANDOM_READER = '''
import json, sys, time
from streaming_core import StreamingDataset
remote, local, limit, out = sys.argv[1:5]
dataset = StreamingDataset(remote=remote, local=local, cache_limit=int(limit), batch_size=4, download_timeout=5)
started = time.monotonic()
ids = [int(sample['id']) for sample in dataset]
with open(out, 'w') as handle:
    json.dump({'ids': ids, 'seconds': time.monotonic() - started}, handle)
'''


@pytest.mark.parametrize('other', ['dataset', 'deleted', 'process'])
def test_idle_random_access_gives_its_pins_to_a_reader_short_of_room(tmp_path, other) -> None:
    """``ds[i]`` keeps the shards it touched twice open and pinned (a notebook, an evaluation pass), then is never
    called again. Another reader of the node that needs that room (another dataset of the directory, the same after
    the first was deleted, another process) used to wait for the cache's timeout and fail; now the idle pins are
    given up and it reads its epoch at once."""
    import gc
    import threading
    remote = write_mds(str(tmp_path / 'remote'), 480, size_limit=1 << 10, sample_size=64)
    local = str(tmp_path / 'cache')
    first = StreamingDataset(remote=remote, local=local, batch_size=4, download_timeout=5)
    largest = max(r.max_size for r in first.shard_manager.readers)
    limit = first._index_bytes + 8 * largest + largest // 2  # no room for a ninth shard while 8 are pinned
    del first
    reader = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5)
    offsets = reader.sample_offset_per_shard
    for _ in range(2):
        for shard in range(8):
            assert int(reader[int(offsets[shard])]['id']) == int(offsets[shard])
    assert len(reader.shard_manager.open_views) == 8  # kept open and pinned: the room is taken
    if other == 'process':
        env = dict(os.environ, PYTHONPATH=ROOT)
        done = subprocess.run([sys.executable, '-c', textwrap.dedent(RANDOM_READER), remote, local, str(limit),
                               str(tmp_path / 'b.json')], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        with open(tmp_path / 'b.json') as handle:
            result = json.load(handle)
        ids, seconds = result['ids'], result['seconds']
    else:
        if other == 'deleted':
            del reader
            gc.collect()
        second = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5)
        found: list = []
        started = time.monotonic()
        thread = threading.Thread(target=lambda: found.append([int(s['id']) for s in second]), daemon=True)
        thread.start()
        thread.join(120)
        seconds = time.monotonic() - started
        assert found, 'the second reader did not finish its epoch'
        ids = found[0]
    assert ids == list(range(480))
    assert seconds < 15, f'the reader short of room waited {seconds:.0f} s for the idle random access'


def test_active_random_access_keeps_its_pins_then_gives_them_up_when_idle(tmp_path) -> None:
    """Random access that keeps reading through its open views is active, not idle: a reader short of room waits
    for it (its views were dropped every second and opened again), and gets the room once it stops."""
    import threading
    remote = write_mds(str(tmp_path / 'remote'), 480, size_limit=1 << 10, sample_size=64)
    local = str(tmp_path / 'cache')
    probe = StreamingDataset(remote=remote, local=str(tmp_path / 'probe'), batch_size=4)
    largest = max(r.max_size for r in probe.shard_manager.readers)
    limit = probe._index_bytes + 8 * largest + largest // 2
    reader = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5)
    offsets = [int(x) for x in reader.sample_offset_per_shard[:8]]
    for _ in range(2):
        for offset in offsets:
            reader[offset]
    second = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5)
    found: list = []
    thread = threading.Thread(target=lambda: found.append([int(s['id']) for s in second]), daemon=True)
    thread.start()
    views = reader.shard_manager.open_views
    kept = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # active: a read every few milliseconds through the open views
        for offset in offsets:
            assert int(reader[offset]['id']) == offset
        kept.append(len(views))
        time.sleep(0.005)
    assert min(kept) == 8 and not found, 'the views of an active reader were given up'
    thread.join(60)
    assert found and found[0] == list(range(480))
