"""A dataset rewritten while a job reads it: the job stops with ``DatasetVersionError`` before reading a file of the
new version, instead of serving the new version's samples under its old index.

Job A reads part of an epoch; the data is rewritten with the same file names and sizes (other sample ids); job B
starts on the same local directory (its construction refreshes the directory for the new version) and reads it.
Before, A went on with B's files: most of its epoch came from the new version, with no error.
"""

from __future__ import annotations

import os
import time

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import DatasetVersionError
from tests.deps import require
from tests.fixtures.data import write_mds


def _read_until_error(samples):
    """The ids read, and the error's message (None when the epoch ended: every file it read was still open)."""
    ids = []
    try:
        for sample in samples:
            ids.append(int(sample['id']))
    except DatasetVersionError as err:
        assert 'changed while this job read it' in str(err)
        return ids, str(err)
    return ids, None


@pytest.mark.parametrize('cache_limit', [None, '20kb'])
def test_a_job_stops_when_another_job_refreshes_its_directory_for_a_new_version(tmp_path, cache_limit):
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9, hashes=['sha1'])  # 34 shards
    a = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, cache_limit=cache_limit,
                         predownload=8)
    samples = iter(a)
    first = [int(next(samples)['id']) for _ in range(30)]
    time.sleep(1)  # A's prefetcher has prepared its window (8 samples ahead): it does not download mid-rewrite
    write_mds(remote, 200, start=1000, size_limit=1 << 9, hashes=['sha1'], exist_ok=True)  # same names and sizes
    b = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=cache_limit)
    assert sorted(int(s['id']) for s in b) == list(range(1000, 1200))
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in first + rest), 'a sample of the new version was served under the old index'
    if message is None:  # every shard it still needed was open (mapped: the old files) before the rewrite
        assert sorted(first + rest) == list(range(200))
    else:
        assert remote in message and local in message and 'Restart the job' in message


def test_a_local_dataset_rewritten_in_place_between_epochs_stops_the_job(tmp_path):
    data = str(tmp_path / 'data')
    write_mds(data, 200, size_limit=1 << 11)
    a = StreamingDataset(local=data, batch_size=4, shuffle=True)
    assert sorted(int(s['id']) for s in a) == list(range(200))
    write_mds(data, 200, start=1000, size_limit=1 << 11, exist_ok=True)
    ids, message = _read_until_error(iter(a))
    assert all(i < 200 for i in ids) and message is not None and 'index.json was rewritten' in message
    again = StreamingDataset(local=data, batch_size=4)  # a new dataset reads the new version
    assert sorted(int(s['id']) for s in again) == list(range(1000, 1200))


def test_what_leaves_a_jobs_files_alone_does_not_stop_it(tmp_path):
    """No false stops: the same directory read as a local dataset after a remote run cached it; a permissions change
    of a local index.json; a file added to a remote Parquet directory that another job then reads."""
    require('pyarrow')
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 60, size_limit=1 << 9)
    assert sorted(int(s['id']) for s in StreamingDataset(remote=remote, local=local, batch_size=4)) == list(range(60))
    cached = StreamingDataset(local=local, batch_size=4, shuffle=True)  # the cache read as a local dataset
    samples = iter(cached)
    first = [int(next(samples)['id']) for _ in range(10)]
    os.chmod(os.path.join(local, 'index.json'), 0o644 if os.stat(os.path.join(local, 'index.json')).st_mode & 0o2
             else 0o666)  # only its change time moves
    assert sorted(first + [int(s['id']) for s in samples]) == list(range(60))

    pq_remote, pq_local = str(tmp_path / 'pq'), str(tmp_path / 'pq-local')
    os.makedirs(pq_remote)
    for part in range(6):
        pq.write_table(pa.table({'id': list(range(part * 10, part * 10 + 10))}), f'{pq_remote}/p{part}.parquet')
    a = StreamingDataset(remote=pq_remote, local=pq_local, batch_size=4, shuffle=True, predownload=4)
    samples = iter(a)
    first = [int(next(samples)['id']) for _ in range(8)]
    pq.write_table(pa.table({'id': list(range(60, 70))}), f'{pq_remote}/p6.parquet')  # a file added
    b = StreamingDataset(remote=pq_remote, local=pq_local, batch_size=4)
    assert sorted(int(s['id']) for s in b) == list(range(70))
    assert sorted(first + [int(s['id']) for s in samples]) == list(range(60))


def test_each_dataset_watches_the_cache_root_it_loaded_under(tmp_path, monkeypatch):
    """A process that moves ``STREAMING_CORE_CACHE_DIR`` (as tests and "another machine" simulations do) after a
    dataset read a directory: a dataset loaded under the new root watches that root's purge counter. The process
    used to keep the first root's state directory for the directory, so a refresh under the new root went unseen."""
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9)
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root1'))
    first = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert int(first[0]['id']) == 0
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'root2'))
    a = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, predownload=8)
    samples = iter(a)
    head = [int(next(samples)['id']) for _ in range(30)]
    time.sleep(1)
    write_mds(remote, 200, start=1000, size_limit=1 << 9, exist_ok=True)  # same names and sizes
    b = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert sorted(int(s['id']) for s in b) == list(range(1000, 1200))
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in head + rest), 'a sample of the new version was served under the old index'
    assert message is not None


@pytest.mark.parametrize('hashes', [None, ['sha1']])
def test_a_job_alone_stops_when_its_remote_is_rewritten_under_it(tmp_path, monkeypatch, hashes):
    """No other job refreshes the directory: the job downloads its next shards from a remote rewritten with the same
    file names and sizes. It used to serve them under its old index. After the remote index changed, a download is
    checked against the hash the job's index records, and without one the job stops; no sample of the new version
    is served either way. A file the rewrite left as it was (the dataset extended in place) still reads."""
    from streaming_core.reading import remote_watch
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 0.0)
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9, hashes=hashes)  # 34 shards
    a = StreamingDataset(remote=remote, local=local, batch_size=4, predownload=4)
    samples = iter(a)
    head = [int(next(samples)['id']) for _ in range(20)]
    time.sleep(1)  # its prefetcher has prepared its window: nothing downloads mid-rewrite
    write_mds(remote, 200, start=1000, size_limit=1 << 9, hashes=hashes, exist_ok=True)  # same names and sizes
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in head + rest), 'a sample of the new version was served under the old index'
    assert message is not None and 'index.json is now' in message
    assert ('no hash' in message) == (hashes is None)

    extended = str(tmp_path / 'extended')
    write_mds(extended, 60, size_limit=1 << 9, hashes=['sha1'])
    b = StreamingDataset(remote=extended, local=str(tmp_path / 'local-b'), batch_size=4, predownload=2)
    samples = iter(b)
    head = [int(next(samples)['id']) for _ in range(4)]
    time.sleep(1)
    write_mds(extended, 60, size_limit=1 << 9, hashes=['sha1'], exist_ok=True)  # the same data, index rewritten
    assert head + [int(s['id']) for s in samples] == list(range(60))


def test_a_remote_index_whose_metadata_alone_changed_stops_no_job_that_has_hashes(tmp_path, monkeypatch):
    """A ``chmod``, a ``touch`` or the same bytes written again change the remote ``index.json``'s stat, which is all
    a job can see of a rewrite that leaves the index identical. With hashes recorded, its downloads are then
    checked and go on (the data is unchanged); without, it stops (docs/guide/cache.md)."""
    import os
    import shutil

    from streaming_core.reading import remote_watch
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 0.0)
    for hashes in (['xxh64'], None):
        remote, local = str(tmp_path / f'remote-{hashes}'), str(tmp_path / f'local-{hashes}')
        write_mds(remote, 200, size_limit=1 << 9, hashes=hashes)
        a = StreamingDataset(remote=remote, local=local, batch_size=4, predownload=2)
        samples = iter(a)
        ids = [int(next(samples)['id']) for _ in range(10)]
        index = os.path.join(remote, 'index.json')
        os.chmod(index, 0o600)
        os.utime(index, ns=(1, 1))
        shutil.copyfile(index, index + '.tmp')
        os.replace(index + '.tmp', index)  # the same bytes, a new file
        rest, message = _read_until_error(samples)
        if hashes:
            assert message is None and ids + rest == list(range(200))
        else:
            assert message is not None and 'no hash' in message and ids + rest == list(range(len(ids + rest)))


def test_a_stream_pickled_from_another_machine_still_rechecks_its_remote(tmp_path):
    """The time of the last check travels with a pickled stream (a Ray or Spark executor): a time ahead of this
    machine's clock, as another machine's may be, must not turn the re-check off."""
    import os
    import pickle

    from streaming_core.reading.remote_watch import expected_hash_after_change
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 40, size_limit=1 << 9, hashes=['xxh64'])
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    stream = dataset.streams[0]
    stream._remote_confirmed_at = time.time() + 1e6
    moved = pickle.loads(pickle.dumps(stream))
    os.utime(os.path.join(remote, 'index.json'), ns=(1, 1))  # the remote index's stat changes
    info = dataset.shards[0].parts[0][0]
    assert expected_hash_after_change(moved, info, info.basename) == ('xxh64', info.hashes['xxh64'])


def test_the_construction_s_stat_counts_as_the_first_recheck(tmp_path, monkeypatch):
    """The remote index was statted at construction: the downloads that follow within RECHECK_SECONDS stat it no
    more (a request saved before every process's first sample, in each forked worker too); later ones do."""
    from streaming_core.reading import index_sync, remote_watch
    monkeypatch.setattr(remote_watch, 'is_remote', lambda url: True)  # as for an object store (a stat is a request)
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 40, size_limit=1 << 9)
    stats = []
    probe = index_sync._probe
    monkeypatch.setattr(index_sync, '_probe', lambda *args, **kwargs: stats.append(args[1]) or probe(*args, **kwargs))
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    constructed = len(stats)  # the construction's (two on a cold cache: before and after the index download)
    assert sorted(dataset[i]['id'] for i in range(40)) == list(range(40))  # every shard downloaded
    assert len(stats) == constructed
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 0.0)
    again = StreamingDataset(remote=remote, local=str(tmp_path / 'other'), batch_size=4)
    constructed = len(stats)
    assert again[0]['id'] == 0 and len(stats) == constructed + 1  # past RECHECK_SECONDS: the download's own


def test_a_path_remote_rewritten_with_equal_sizes_and_no_hashes_is_seen_at_the_next_download(tmp_path):
    """One job reads a path remote (a local or mounted directory) without hashes; the remote is rewritten in place with
    files of the same names and sizes. Within the 10 s between two stats of its index the job served the new
    version's samples under its old index (18 of the old, 182 of the new in a newcomer's run). A path remote's index
    is statted before every download (a stat, not a request): the next download stops the job, naming the change."""
    import shutil
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9)
    samples = iter(StreamingDataset(remote=remote, local=local, batch_size=4, predownload=4))
    head = [int(next(samples)['id']) for _ in range(10)]
    new = write_mds(str(tmp_path / 'new'), 200, start=1000, size_limit=1 << 9)
    time.sleep(0.01)
    for name in sorted(os.listdir(new)):
        shutil.copyfile(os.path.join(new, name), os.path.join(remote, name))
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in head + rest), 'a sample of the new version was served under the old index'
    assert message is not None and 'index.json is now' in message


def test_a_download_is_checked_against_a_fast_hash_before_the_next_recheck(tmp_path, monkeypatch):
    """Between two stats of the remote index (every RECHECK_SECONDS), a rewrite with the same names and sizes is
    caught by the xxh hash the index records, which every download is checked against: the remote index is statted
    at once and the job stops naming the change. A remote file corrupt under an unchanged index is a hash mismatch
    naming the file, never served."""
    import os

    from streaming_core.errors import HashMismatchError
    from streaming_core.reading import remote_watch
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 1e6)  # no periodic stat within the test
    monkeypatch.setattr(remote_watch, 'is_remote', lambda url: True)  # as for an object store (a path: every download)
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9, hashes=['xxh3_64'])
    a = StreamingDataset(remote=remote, local=local, batch_size=4, predownload=4)
    samples = iter(a)
    head = [int(next(samples)['id']) for _ in range(20)]
    time.sleep(1)
    write_mds(remote, 200, start=1000, size_limit=1 << 9, hashes=['xxh3_64'], exist_ok=True)
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in head + rest), 'a sample of the new version was served under the old index'
    assert message is not None and 'index.json is now' in message

    remote, local = str(tmp_path / 'remote-2'), str(tmp_path / 'local-2')
    write_mds(remote, 40, size_limit=1 << 9, hashes=['xxh64'])
    shard = os.path.join(remote, 'shard.00003.mds')
    data = bytearray(open(shard, 'rb').read())
    data[-1] ^= 0xFF
    open(shard, 'wb').write(bytes(data))
    b = StreamingDataset(remote=remote, local=local, batch_size=4, download_retry=0)
    with pytest.raises(HashMismatchError, match=r'shard\.00003\.mds'):
        for i in range(b.num_samples):
            b[i]


@pytest.mark.parametrize('how', ['emptied', 'rewritten'])
def test_a_rewrite_met_by_a_download_stops_the_job_at_once_saying_so(tmp_path, monkeypatch, caplog, how):
    """A writer rewriting a remote with ``exist_ok=True`` empties it first. A download that then found its file gone
    ended the job as a ``RemoteNotFoundError`` of a shard; it now stops at once with ``DatasetVersionError`` naming
    the change, and so does a file of another hash, after its retries (it may be a transfer fault)."""
    import shutil

    from streaming_core.reading import remote_watch
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 1e6)  # no periodic stat: the mismatch alone triggers it
    monkeypatch.setattr(remote_watch, 'is_remote', lambda url: True)  # as for an object store (a path: every download)
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9, hashes=['xxh64'])
    samples = iter(StreamingDataset(remote=remote, local=local, batch_size=4, predownload=1, download_retry=2))
    head = [int(next(samples)['id']) for _ in range(6)]
    time.sleep(1)
    if how == 'emptied':
        shutil.rmtree(remote)
        os.makedirs(remote)
    else:
        write_mds(remote, 200, start=1000, size_limit=1 << 9, hashes=['xxh64'], exist_ok=True)
    with caplog.at_level('WARNING', logger='streaming_core'):
        rest, message = _read_until_error(samples)
    assert all(i < 200 for i in head + rest)
    assert message is not None and 'index.json is now' in message and 'shard.' in message
    assert ('absent' in message) == (how == 'emptied')
    if how == 'emptied':  # a file gone is certain; another hash may be a transfer fault, retried first
        assert not [r for r in caplog.records if 'retrying' in r.getMessage()], 'a removal was retried'


@pytest.mark.parametrize('hashes', [None, ['xxh64']])
def test_a_remote_without_its_index_serves_nothing_new_under_the_local_copy(tmp_path, monkeypatch, hashes):
    """A writer rewriting a remote in place removes its index.json first. A job constructed meanwhile used to fall
    back to its local copy of the old index and download the new version's files under it; a job already running
    took the missing index for an unreachable one. Both now download only files that match the recorded hashes,
    and stop (DatasetVersionError) otherwise."""
    import os
    import warnings

    from streaming_core.reading import remote_watch
    monkeypatch.setattr(remote_watch, 'RECHECK_SECONDS', 0.0)
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 400, size_limit=1 << 10, hashes=hashes)
    first = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert int(first[0]['id']) == 0  # synced: the local copy of the index, one shard
    running = iter(StreamingDataset(remote=remote, local=local, batch_size=4, predownload=1))
    head = [int(next(running)['id']) for _ in range(4)]
    rewrite = str(tmp_path / 'v2')
    write_mds(rewrite, 400, start=100000, size_limit=1 << 10, hashes=hashes)
    os.remove(os.path.join(remote, 'index.json'))
    for name in sorted(os.listdir(rewrite))[:8]:  # half-way through: the first shards are the new version's
        if name.startswith('shard.'):
            os.replace(os.path.join(rewrite, name), os.path.join(remote, name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        late = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert any('has no index.json' in str(w.message) for w in caught)
    assert int(late[0]['id']) == 0  # already local: still the old version's
    for samples, before in ((iter(late), []), (running, head)):
        rest, message = _read_until_error(samples)
        assert all(i < 400 for i in before + rest), 'a sample of the new version was served under the old index'
        assert message is not None and 'absent' in message


class _HeldShardServer:
    """A static server whose shard GETs read the file at once (the version of that moment), then hold the body
    until :attr:`release` is set: a slow download of the old version that finishes after the remote changed."""

    def __init__(self, root):
        import threading
        from functools import partial
        from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
        self.requested, self.release = threading.Event(), threading.Event()
        server = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if not self.path.endswith('.mds'):
                    return super().do_GET()
                with open(os.path.join(root, self.path.lstrip('/')), 'rb') as handle:
                    data = handle.read()
                self.send_response(200)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                server.requested.set()
                server.release.wait(60)
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), partial(Handler, directory=root))
        self._server.daemon_threads = True
        self.url = f'http://127.0.0.1:{self._server.server_address[1]}'
        threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def stop(self):
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.parametrize('hashes', [['xxh64'], None])
def test_an_old_version_s_slow_download_is_not_installed_after_a_refresh(tmp_path, hashes):
    """Job P (version 1) is downloading a shard when the remote is rewritten (same names and sizes) and job Q
    constructs on the same local directory, refreshing it for version 2 while P's download is in flight (no local
    file to remove). P's download then finishes with version 1's bytes. It must not be renamed into the directory
    that now holds version 2's index: P stops with DatasetVersionError, and Q and a later job R read version 2's
    samples (they read version 1's, before, with or without hashes recorded)."""
    import json
    import subprocess
    import sys
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 10, hashes=hashes)
    server = _HeldShardServer(remote)
    try:
        job = ('import json, sys\n'
               'from streaming_core import StreamingDataset\n'
               'from streaming_core.errors import DatasetVersionError\n'
               'ds = StreamingDataset(remote=sys.argv[1], local=sys.argv[2], batch_size=1, download_timeout=60)\n'
               'try:\n'
               '    print(json.dumps({"ids": [int(ds[i]["id"]) for i in range(len(ds))]}))\n'
               'except DatasetVersionError as err:\n'
               '    print(json.dumps({"error": str(err)}))\n')
        p = subprocess.Popen([sys.executable, '-c', job, server.url, local], stdout=subprocess.PIPE, text=True,
                             cwd=str(tmp_path))
        assert server.requested.wait(60), 'P never asked for its shard'
        write_mds(remote, 10, start=100, hashes=hashes, exist_ok=True)  # version 2: same names and sizes
        q = StreamingDataset(remote=server.url, local=local, batch_size=1)  # refreshes the directory
        server.release.set()
        out, _ = p.communicate(timeout=120)
        result = json.loads(out.strip().splitlines()[-1])
        assert 'changed while this job read it' in result.get('error', ''), result
        assert [int(q[i]['id']) for i in range(len(q))] == list(range(100, 110))
        r = StreamingDataset(remote=server.url, local=local, batch_size=1)
        assert sorted(int(s['id']) for s in r) == list(range(100, 110))
    finally:
        server.stop()


def test_a_cut_download_of_a_dataset_extended_in_place_is_retried(tmp_path, monkeypatch):
    """A dataset extended in place (its index.json rewritten, its shards untouched, hashes recorded) is read on; one
    cut transfer (a short file) is a transfer fault, retried, never taken for a rewrite."""
    from streaming_core.builtin import local as local_backend
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 40, hashes=['sha1'], size_limit=600)
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4, download_retry=2)
    index = os.path.join(remote, 'index.json')
    info = os.stat(index)
    os.utime(index, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))  # rewritten: a new version to stat
    dataset.streams[0]._remote_confirmed_at = 0.0
    plain, cuts = local_backend.LocalBackend.download, []

    def cut_once(self, url, path, *, timeout):
        plain(self, url, path, timeout=timeout)
        if url.endswith('.mds') and not cuts:
            cuts.append(url)
            with open(path, 'r+b') as handle:
                handle.truncate(10)

    monkeypatch.setattr(local_backend.LocalBackend, 'download', cut_once)
    assert sorted(int(s['id']) for s in dataset) == list(range(40)) and len(cuts) == 1


def _write_ids(out: str, first: int) -> None:
    """40 samples of ids ``first``..., no hashes: every version has the same index.json bytes."""
    from streaming_mds import MDSWriter
    with MDSWriter(out=out, columns={'id': 'int'}, size_limit=1 << 8, exist_ok=True) as writer:
        for i in range(first, first + 40):
            writer.write({'id': i})


def _listing(directory: str) -> dict[str, tuple[int, int]]:
    return {n: (os.stat(os.path.join(directory, n)).st_ino, os.stat(os.path.join(directory, n)).st_mtime_ns)
            for n in os.listdir(directory)}


@pytest.mark.parametrize('writes', [1, 99])
def test_a_remote_written_while_its_index_is_read_gets_a_version_the_job_can_watch(tmp_path, monkeypatch, writes):
    """A writer lands between the stat and the download of the remote index (made deterministic here): the index is
    read again under its new stat, so the job knows its version and stops when the remote changes again; a remote
    that keeps changing is refused, touching nothing. (It was identified by the digest of its bytes, which no
    download compared with the remote's stat: the job served v2 then v3 samples without an error.)"""
    from streaming_core.reading import index_sync
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'cache'))
    _write_ids(remote, 0)
    assert [s['id'] for s in StreamingDataset(remote=remote, local=local, batch_size=4)] == list(range(40))
    real, landed = index_sync.download_file, []

    def racing(*args, **kwargs):
        real(*args, **kwargs)
        if len(landed) < writes:
            landed.append(1)
            time.sleep(0.01)  # a new modification time, whatever the file system's clock granularity
            _write_ids(remote, 1000 * len(landed))

    monkeypatch.setattr(index_sync, 'download_file', racing)
    os.utime(os.path.join(remote, 'index.json'))  # the construction checks the remote again
    if writes > 1:
        before = _listing(local)
        with pytest.raises(DatasetVersionError, match='changed 3 times while it was read'):
            StreamingDataset(remote=remote, local=local, batch_size=4)
        assert _listing(local) == before
        return
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    monkeypatch.setattr(index_sync, 'download_file', real)
    assert dataset.streams[0].index_identity.startswith('stat:')
    assert [dataset[i]['id'] for i in range(20)] == list(range(1000, 1020))
    time.sleep(0.01)
    _write_ids(remote, 2000)
    with pytest.raises(DatasetVersionError):
        [dataset[i]['id'] for i in range(20, 40)]
    assert [s['id'] for s in StreamingDataset(remote=remote, local=local, batch_size=4)] == list(range(2000, 2040))


def test_a_version_known_by_its_digest_only_is_never_taken_for_the_remote_s_next_one(tmp_path, monkeypatch):
    """A job whose remote could not be statted recorded the version by the digest of its index bytes; the remote is
    then rewritten (same index bytes: no hashes, same sizes). The next job, which can stat it, cannot tell that the
    local files are of the version it reads: they are fetched again, never served as the new version."""
    from streaming_core.reading import index_sync
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'cache'))
    _write_ids(remote, 0)
    with monkeypatch.context() as patch:
        patch.setattr(index_sync, '_probe', lambda *args, **kwargs: None)
        dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
        assert dataset.streams[0].index_identity.startswith('sha256:')
        assert [s['id'] for s in dataset] == list(range(40))
    index = open(os.path.join(remote, 'index.json'), 'rb').read()
    _write_ids(remote, 1000)
    assert open(os.path.join(remote, 'index.json'), 'rb').read() == index
    assert [s['id'] for s in StreamingDataset(remote=remote, local=local, batch_size=4)] == list(range(1000, 1040))


def test_an_object_store_whose_etag_moves_without_a_write_is_read_by_its_digest(tmp_path, monkeypatch):
    """Servers behind a balancer (or a CDN) may give one object two etags: the same index bytes read twice under two
    stats are one version, known by its digest (as before the index was read again under a new stat), not a writer
    at work. (Simulated: the probe alternates between two etags, and the path remote is taken for an object store.)"""
    from streaming_core.reading import index_sync
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', str(tmp_path / 'cache'))
    _write_ids(remote, 0)
    calls = []

    def flapping(stream, url, **kwargs):
        calls.append(url)
        return f'etag:"{len(calls) % 2}"'

    monkeypatch.setattr(index_sync, '_probe', flapping)
    monkeypatch.setattr(index_sync, 'is_remote', lambda url: True)
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert dataset.streams[0].index_identity.startswith('sha256:')
    assert [s['id'] for s in dataset] == list(range(40))
