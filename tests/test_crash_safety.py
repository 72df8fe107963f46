"""Kill -9 in the middle of a download, an eviction and an epoch; start again in the same cache: correct,
complete data, no manual clean-up, nothing of ours in /dev/shm."""

from __future__ import annotations

import http.server
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from streaming_core import StreamingDataset
from streaming_core.reading.temp_sweep import FOREIGN_TEMP_AGE
from streaming_core.storage.facade import host_token
from tests.fixtures.data import ids_of, write_mds
from tests.multiproc import ROOT


def _spawn(module, *args, env=None):
    full_env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1', **(env or {}))
    return subprocess.Popen([sys.executable, '-m', module, *args], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_for(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError('condition not reached in time')
        time.sleep(0.02)


def _shm_names():
    """Names in /dev/shm that a streaming library would create (ours creates none; the reference's are NNNNNN_*)."""
    names = set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()
    return {n for n in names if 'streaming' in n or re.match(r'^\d{6}_', n)}


class _StallingHandler(http.server.SimpleHTTPRequestHandler):
    stall = threading.Event()

    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        if self.stall.is_set() and '.mds' in self.path:
            outputfile.write(source.read(100))
            outputfile.flush()
            time.sleep(60)
        super().copyfile(source, outputfile)


@pytest.fixture
def stalling_server(tmp_path):
    root = tmp_path / 'served'
    root.mkdir()
    handler = lambda *a, **k: _StallingHandler(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f'http://127.0.0.1:{server.server_address[1]}'
    _StallingHandler.stall.clear()
    server.shutdown()


@pytest.mark.slow
def test_kill_during_download_then_restart(tmp_path, stalling_server):
    root, url = stalling_server
    write_mds(str(root / 'ds'), 120, size_limit=1 << 10, sample_size=64)
    local = tmp_path / 'cache'
    config = {'dataset': {'remote': f'{url}/ds', 'local': str(local), 'batch_size': 4, 'download_timeout': 120}}
    before = _shm_names()
    _StallingHandler.stall.set()
    proc = _spawn('tests.workers.reader', json.dumps(config), str(tmp_path / 'progress.json'))
    _wait_for(lambda: local.exists() and any(n.endswith('.tmp') for n in os.listdir(local)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any(n.endswith('.tmp') for n in os.listdir(local))  # the killed download's partial file
    _StallingHandler.stall.clear()
    proc = _spawn('tests.workers.reader', json.dumps(config), str(tmp_path / 'progress2.json'))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out.decode()[-3000:]
    with open(tmp_path / 'progress2.json') as handle:
        assert json.load(handle)['ids'] == list(range(120))
    assert not [n for n in os.listdir(local) if n.endswith('.tmp')]
    assert _shm_names() - before == set()


@pytest.mark.slow
@pytest.mark.parametrize('workers', [0, 2])
def test_kill_mid_epoch_then_resume_from_state(tmp_path, workers):
    remote = write_mds(str(tmp_path / 'remote'), 300, size_limit=1 << 10)
    local = str(tmp_path / 'cache')
    dataset_args = {'remote': remote, 'local': local, 'batch_size': 5, 'shuffle': True, 'num_canonical_nodes': 2,
                    'shuffle_block_size': 60}
    expected = ids_of(StreamingDataset(**dict(dataset_args, local=str(tmp_path / 'other'))))
    progress = tmp_path / 'progress.json'
    config = {'dataset': dataset_args, 'workers': workers, 'sleep': 0.01}
    proc = _spawn('tests.workers.reader', json.dumps(config), str(progress))
    _wait_for(lambda: progress.exists() and len(json.loads(progress.read_text())['ids']) >= 100)
    time.sleep(random.random() * 0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if workers:
        time.sleep(0.5)  # the killed loader's workers notice their parent is gone and exit
    partial = json.loads(progress.read_text())
    assert 0 < len(partial['ids']) < 300
    proc = _spawn('tests.workers.reader', json.dumps(config), str(progress))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out.decode()[-3000:]
    final = json.loads(progress.read_text())
    assert final['done'] and final['ids'] == expected


@pytest.mark.slow
def test_kill_during_eviction_then_restart(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 600, size_limit=1 << 10, sample_size=64)
    local = str(tmp_path / 'cache')
    dataset_args = {'remote': remote, 'local': local, 'batch_size': 4, 'cache_limit': '28kb', 'shuffle': True,
                    'num_canonical_nodes': 1, 'shuffle_block_size': 100}
    for round_ in range(3):
        progress = tmp_path / f'progress{round_}.json'
        proc = _spawn('tests.workers.reader', json.dumps({'dataset': dataset_args}), str(progress))
        _wait_for(lambda p=progress, n=40 * (round_ + 1): p.exists() and len(json.loads(p.read_text())["ids"]) >= n)
        time.sleep(random.random() * 0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    dataset = StreamingDataset(**dataset_args)
    assert sorted(ids_of(dataset)) == list(range(600))
    assert dataset.cache_usage <= 28 * 1024
    shard_bytes = sum(os.path.getsize(os.path.join(local, n)) for n in os.listdir(local) if n.startswith('shard.'))
    assert shard_bytes + os.path.getsize(os.path.join(local, 'index.json')) <= 28 * 1024


@pytest.mark.parametrize(('remote', 'compression', 'swept'), [(False, 'zstd', True), (True, None, True),
                                                           (False, None, False)],
                         ids=['in-place-compressed', 'local-copy', 'in-place-plain'])
def test_a_dead_readers_temporary_file_is_swept_where_readers_write(tmp_path, remote, compression, swept):
    """Readers write into a local copy of a remote (downloads) and beside compressed shards (decompression, also in
    a directory read in place): a reader killed mid-way leaves a temporary file as big as a shard, which the next
    construction removes. A directory of plain shards read in place is the user's alone: it is never walked."""
    data = write_mds(str(tmp_path / 'data'), 20, compression=compression)
    local = str(tmp_path / 'local') if remote else data
    kwargs = {'remote': data, 'local': local} if remote else {'local': data}
    StreamingDataset(batch_size=2, **kwargs)
    dead = int(subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True,
                              text=True, check=True).stdout)
    left = os.path.join(local, f'shard.00000.mds.{dead}-{host_token()}.0123abcd.tmp')
    foreign = os.path.join(local, f'shard.00001.mds.{dead}-0badcafe.0123abcd.tmp')  # another host's (or container's)
    stale = os.path.join(local, f'shard.00002.mds.{dead}-0badcafe.4567abcd.tmp')
    for path in (left, foreign, stale):
        with open(path, 'wb') as handle:
            handle.write(b'partial')
    day_ago = time.time() - FOREIGN_TEMP_AGE - 60
    os.utime(stale, (day_ago, day_ago))
    assert ids_of(StreamingDataset(batch_size=2, **kwargs)) == list(range(20))
    assert os.path.exists(left) is not swept
    assert os.path.exists(foreign)  # its pid means nothing here: kept while it may still be written
    assert os.path.exists(stale) is not swept  # untouched for a day: removed like a dead writer's


def test_a_damaged_sweep_marker_is_rewritten(tmp_path):
    """The state directory's sweep marker holding bytes that are not text (a damaged disk, a stray write): the
    directory is swept and the marker rewritten, instead of every construction failing with a bare
    ``UnicodeDecodeError``."""
    from streaming_core.common.paths import state_dir
    data = write_mds(str(tmp_path / 'data'), 20)
    local = str(tmp_path / 'local')
    StreamingDataset(remote=data, local=local, batch_size=2)
    marker = os.path.join(state_dir(local), 'temp-sweep')
    assert os.path.exists(marker)
    with open(marker, 'wb') as handle:
        handle.write(os.urandom(64) + b'\xff\xfe')
    assert ids_of(StreamingDataset(remote=data, local=local, batch_size=2)) == list(range(20))
    assert set(json.loads(open(marker, 'rb').read())) == {''}  # rewritten: the directory's modification time


def _dead_pid():
    return int(subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True,
                              text=True, check=True).stdout)


def test_a_writer_alive_at_one_sweep_and_dead_at_the_next_is_swept_though_the_directory_did_not_change(tmp_path):
    """A DataLoader worker writing a download when another process sweeps, then killed before anything else changes
    the directory (the launcher kills the rest of the job): the restart must still remove its file. The sweep that
    saw it alive is not recorded as final (the hardening kill test left such a file on a CI run)."""
    data = write_mds(str(tmp_path / 'data'), 20)
    local = str(tmp_path / 'local')
    StreamingDataset(remote=data, local=local, batch_size=2)
    writer = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        left = os.path.join(local, f'shard.00000.mds.{writer.pid}-{host_token()}.0123abcd.tmp')
        with open(left, 'wb') as handle:
            handle.write(b'partial')
        old = time.time() - 60  # settled long before the sweeps: only the live writer's file decides
        os.utime(local, (old, old))
        StreamingDataset(remote=data, local=local, batch_size=2)
        assert os.path.exists(left)  # its writer runs
    finally:
        writer.kill()
        writer.wait()
    os.utime(local, (old, old))
    assert ids_of(StreamingDataset(remote=data, local=local, batch_size=2)) == list(range(20))
    assert not os.path.exists(left)


def test_a_file_created_in_the_clock_tick_of_a_sweep_is_swept_next_time(tmp_path):
    """A filesystem clock is coarse (a few milliseconds, a second on some): a temporary file created in the same tick
    as a sweep's look at the directory leaves its modification time as recorded. A marker written that soon after
    the directory's last change is not trusted."""
    data = write_mds(str(tmp_path / 'data'), 20)
    local = str(tmp_path / 'local')
    StreamingDataset(remote=data, local=local, batch_size=2)
    recorded = os.stat(local).st_mtime_ns
    left = os.path.join(local, f'shard.00000.mds.{_dead_pid()}-{host_token()}.0123abcd.tmp')
    with open(left, 'wb') as handle:
        handle.write(b'partial')
    os.utime(local, ns=(recorded, recorded))  # as if created in the same clock tick
    assert ids_of(StreamingDataset(remote=data, local=local, batch_size=2)) == list(range(20))
    assert not os.path.exists(left)


def test_a_dead_writers_file_in_a_subdirectory_is_swept_though_the_top_directory_did_not_change(tmp_path):
    """A dataset merged from partitions (``part-0/shard.00000.mds``...) downloads into subdirectories, whose changes do
    not touch the top directory's modification time: the sweep's marker records each directory it walked."""
    from streaming_core.writing.merge import merge_index
    root = str(tmp_path / 'data')
    parts = [write_mds(os.path.join(root, f'part-{p}'), 10, start=10 * p) for p in range(2)]
    merge_index([os.path.join(p, 'index.json') for p in parts], root)
    local = str(tmp_path / 'local')
    assert sorted(ids_of(StreamingDataset(remote=root, local=local, batch_size=2))) == list(range(20))
    old = time.time() - 60
    for directory in (local, os.path.join(local, 'part-0'), os.path.join(local, 'part-1')):
        os.utime(directory, (old, old))  # settled long before the sweeps: only the directories' changes decide
    StreamingDataset(remote=root, local=local, batch_size=2)  # a sweep whose marker is trusted from now on
    left = os.path.join(local, 'part-0', f'shard.00000.mds.{_dead_pid()}-{host_token()}.0123abcd.tmp')
    with open(left, 'wb') as handle:
        handle.write(b'partial')
    os.utime(local, (old, old))
    assert sorted(ids_of(StreamingDataset(remote=root, local=local, batch_size=2))) == list(range(20))
    assert not os.path.exists(left)


def test_a_young_temporary_file_of_another_host_does_not_make_every_construction_walk_the_directory(tmp_path):
    """Another host's (or container's) temporary file is judged by its age (a day): while it is young, the sweep
    is still recorded as done, so constructions do not walk every file of the directory again (at 10^5 files, a walk
    per construction for a day)."""
    from streaming_core.common.paths import state_dir
    data = write_mds(str(tmp_path / 'data'), 20)
    local = str(tmp_path / 'local')
    StreamingDataset(remote=data, local=local, batch_size=2)
    foreign = os.path.join(local, f'shard.00001.mds.{_dead_pid()}-0badcafe.0123abcd.tmp')
    with open(foreign, 'wb') as handle:
        handle.write(b'partial')
    StreamingDataset(remote=data, local=local, batch_size=2)
    marker = os.path.join(state_dir(local), 'temp-sweep')
    assert set(json.loads(open(marker, 'rb').read())) == {''}  # a complete sweep, not 'pending'
    assert os.path.exists(foreign)
