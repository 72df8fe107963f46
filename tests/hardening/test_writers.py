"""Writers lose nothing: killed (SIGKILL at a random sample) or failing mid-way, a writer never leaves an
``index.json`` that names a missing or partial shard, locally or on the loopback S3 server. Rerunning into the same
output refuses without ``exist_ok`` and rewrites cleanly with it.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import UploadError
from streaming_core.storage.hashing import get_hash
from tests.hardening.conftest import BUCKET, S3Place, boto_client, list_keys
from tests.hardening.harness import kill, read_json, spawn, tail, wait_for
from tests.hardening.hostile import columns_of, mds_sample

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

COUNT = 300
KILL_BEFORE = COUNT - 100  # a kill lands with work left even when a busy machine delays the signal


def _files_of(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The files a shard entry says are stored (the compressed form when there is one)."""
    out = []
    for key in sorted(entry):
        if key.startswith('raw_'):
            zipped = entry.get('zip_' + key[4:])
            out.append(zipped if zipped else entry[key])
    return out


def _check(info: dict[str, Any], data: bytes | None, where: str) -> None:
    assert data is not None, f'{where}: the index names {info["basename"]}, which does not exist'
    assert len(data) == info['bytes'], f'{where}: {info["basename"]} has {len(data)} bytes, index says {info["bytes"]}'
    for algo, digest in info['hashes'].items():
        assert get_hash(algo)(data) == digest, f'{where}: {info["basename"]} does not match its {algo}'


def check_local(directory: str) -> dict[str, Any] | None:
    """Every file a local ``index.json`` names exists with its size and hashes; returns the index (or None)."""
    path = os.path.join(directory, 'index.json')
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        index = json.load(handle)
    for entry in index['shards']:
        for info in _files_of(entry):
            file = os.path.join(directory, info['basename'])
            data = open(file, 'rb').read() if os.path.exists(file) else None
            _check(info, data, directory)
    return index


def check_remote(server: str, prefix: str) -> dict[str, Any] | None:
    """The same for a dataset under ``prefix`` of the hardening bucket."""
    client = boto_client(server)
    keys = list_keys(server, prefix)
    if 'index.json' not in keys:
        return None
    index = json.loads(client.get_object(Bucket=BUCKET, Key=f'{prefix}/index.json')['Body'].read())
    for entry in index['shards']:
        for info in _files_of(entry):
            data = None
            if info['basename'] in keys:
                data = client.get_object(Bucket=BUCKET, Key=f'{prefix}/{info["basename"]}')['Body'].read()
            _check(info, data, f's3://{BUCKET}/{prefix}')
    return index


def ids_in(remote: str | None, local: str, options: dict[str, Any] | None = None) -> list[int]:
    """The ``id`` of every sample of the dataset, in order."""
    dataset = StreamingDataset(remote=remote, local=local, batch_size=1, storage_options=options)
    return [int(dataset[i]['id']) for i in range(dataset.num_samples)]


def run_writer(tmp_path: Any, config: dict[str, Any], kill_after: int | None = None,
               timeout: float = 120) -> dict[str, Any] | None:
    """Run ``workers/write.py``; with ``kill_after``, SIGKILL it once that many samples are written. Returns its
    result (None when killed before it finished)."""
    tag = uuid.uuid4().hex[:6]
    progress, result, log = (str(tmp_path / f'{name}-{tag}') for name in ('progress', 'result', 'log'))
    proc = spawn('tests.hardening.workers.write', json.dumps({**config, 'progress': progress}), result, log=log)
    if kill_after is not None:
        def written() -> int:
            if not os.path.exists(progress):
                return 0
            with open(progress) as handle:
                return handle.read().count('\n')
        try:
            wait_for(lambda: written() >= kill_after or proc.poll() is not None, timeout, f'{kill_after} samples',
                     log=log)
        finally:
            kill(proc)
    else:
        try:
            proc.wait(timeout=timeout)
        except Exception:
            kill(proc)
            raise AssertionError(f'writer did not finish:\n{tail(log)}') from None
    return read_json(result)


@pytest.fixture
def rng() -> random.Random:
    seed = int(os.environ.get('HARDENING_SEED', time.time_ns() % 100_000))
    print(f'HARDENING_SEED={seed}')
    return random.Random(seed)


@pytest.mark.parametrize('kind', ['mds', 'json', 'csv'])
def test_writer_killed_locally_leaves_no_bad_index_and_reruns(tmp_path: Any, rng: random.Random, kind: str) -> None:
    out = str(tmp_path / 'out')
    writer = {'size_limit': 1 << 10, 'hashes': ['sha1'], 'compression': rng.choice([None, 'zstd'])}
    config = {'kind': kind, 'out': out, 'count': COUNT, 'writer': writer, 'sleep': 0.002}
    at = rng.randrange(1, KILL_BEFORE)
    run_writer(tmp_path, config, kill_after=at)
    index = check_local(out)
    assert index is None, f'killed at sample {at}, yet an index was committed'
    _rerun(tmp_path, config, writer, out)
    assert check_local(out) is not None
    assert ids_in(None, out) == list(range(COUNT))


def _rerun(tmp_path: Any, config: dict[str, Any], writer: dict[str, Any], local: str) -> None:
    """Rerun a killed writer: refused without ``exist_ok`` when it left files behind, then rewritten with it."""
    if os.path.isdir(local) and os.listdir(local):
        refused = run_writer(tmp_path, {**config, 'sleep': 0})
        assert refused['error']['type'] == 'DirectoryNotEmptyError', refused  # never over a partial output
        assert 'FileExistsError' in refused['error']['mro']
        assert os.listdir(local), 'the refused writer removed the leftovers'
        assert run_writer(tmp_path, {**config, 'sleep': 0, 'writer': {**writer, 'exist_ok': True}}) == {'done': True}
    else:  # killed before its first shard: an empty directory is a fine output
        assert run_writer(tmp_path, {**config, 'sleep': 0}) == {'done': True}


def test_writer_killed_while_uploading_to_s3_leaves_no_bad_index_and_reruns(tmp_path: Any, s3: S3Place,
                                                                            rng: random.Random) -> None:
    writer = {'size_limit': 1 << 10, 'hashes': ['sha1'], 'storage_options': s3.options, 'max_workers': 4}
    config = {'kind': 'mds', 'out': s3.url('out'), 'count': COUNT, 'writer': writer, 'sleep': 0.002}
    at = rng.randrange(1, KILL_BEFORE)
    run_writer(tmp_path, config, kill_after=at)
    assert check_remote(s3.server, f'{s3.prefix}/out') is None, f'killed at sample {at}, yet an index was committed'
    assert run_writer(tmp_path, {**config, 'sleep': 0, 'writer': {**writer, 'exist_ok': True}}) == {'done': True}
    assert check_remote(s3.server, f'{s3.prefix}/out') is not None
    assert ids_in(s3.url('out'), str(tmp_path / 'read'), s3.options) == list(range(COUNT))
    refused = run_writer(tmp_path, {**config, 'sleep': 0})
    assert refused['error']['type'] == 'DirectoryNotEmptyError', refused  # a committed remote dataset is kept
    assert 'FileExistsError' in refused['error']['mro']
    assert ids_in(s3.url('out'), str(tmp_path / 'read-again'), s3.options) == list(range(COUNT))


def test_writer_killed_with_a_local_and_remote_pair_refuses_to_rerun_over_its_leftovers(
        tmp_path: Any, s3: S3Place, rng: random.Random) -> None:
    local = str(tmp_path / 'staging')
    writer = {'size_limit': 1 << 10, 'storage_options': s3.options, 'keep_local': True}
    config = {'kind': 'mds', 'out': [local, s3.url('pair')], 'count': COUNT, 'writer': writer, 'sleep': 0.002}
    run_writer(tmp_path, config, kill_after=rng.randrange(1, KILL_BEFORE))
    assert check_local(local) is None and check_remote(s3.server, f'{s3.prefix}/pair') is None
    _rerun(tmp_path, config, writer, local)
    assert check_local(local) is not None and check_remote(s3.server, f'{s3.prefix}/pair') is not None
    assert ids_in(s3.url('pair'), str(tmp_path / 'read'), s3.options) == list(range(COUNT))


def test_rewrite_over_a_remote_dataset_killed_midway_leaves_no_stale_index(tmp_path: Any, s3: S3Place,
                                                                           rng: random.Random) -> None:
    writer = {'size_limit': 1 << 10, 'hashes': ['sha1'], 'storage_options': s3.options, 'exist_ok': True}
    config = {'kind': 'mds', 'out': s3.url('rewrite'), 'count': COUNT, 'writer': writer}
    assert run_writer(tmp_path, config) == {'done': True}
    rewrite = {**config, 'start': 5000, 'writer': {**writer, 'size_limit': 700}, 'sleep': 0.002}
    run_writer(tmp_path, rewrite, kill_after=rng.randrange(COUNT // 3, COUNT - 10))
    check_remote(s3.server, f'{s3.prefix}/rewrite')  # any index left must name only the files it describes
    assert run_writer(tmp_path, {**rewrite, 'sleep': 0}) == {'done': True}
    assert ids_in(s3.url('rewrite'), str(tmp_path / 'read'), s3.options) == list(range(5000, 5000 + COUNT))


def test_exception_in_the_writing_block_commits_only_complete_samples(tmp_path: Any) -> None:
    from streaming_mds import MDSWriter
    out = str(tmp_path / 'out')
    with pytest.raises(KeyError, match='boom'):
        with MDSWriter(out=out, columns=columns_of('mds'), size_limit=1 << 10, hashes=['sha1']) as writer:
            for i in range(100):
                writer.write(mds_sample(i))
            raise KeyError('boom')
    assert check_local(out) is not None
    assert ids_in(None, out) == list(range(100))


def test_sample_failing_to_encode_midway_commits_only_the_samples_before_it(tmp_path: Any) -> None:
    from streaming_mds import MDSWriter
    out = str(tmp_path / 'out')
    with pytest.raises(Exception, match='int'):
        with MDSWriter(out=out, columns=columns_of('mds'), size_limit=1 << 10) as writer:
            for i in range(100):
                writer.write(mds_sample(i) if i != 77 else {**mds_sample(i), 'id': 'not an int'})
    assert check_local(out) is not None
    assert ids_in(None, out) == list(range(77))


@pytest.mark.parametrize('failing', ['shard', 'index'])
@pytest.mark.parametrize('keep_local', [False, True])
def test_failed_upload_commits_no_index_anywhere(tmp_path: Any, s3: S3Place, fault_proxy: Any, failing: str,
                                                 keep_local: bool) -> None:
    from streaming_mds import MDSWriter
    proxy = fault_proxy(s3.server)
    proxy.fail(None, 503, method='PUT', path=r'/shard\.00003\.mds' if failing == 'shard' else r'/index\.json')
    local = str(tmp_path / 'staging')
    with pytest.raises(UploadError) as info:
        with MDSWriter(out=(local, s3.url('failing')), columns=columns_of('mds'), size_limit=1 << 10,
                       keep_local=keep_local, retry=2, storage_options=s3.via(proxy.url)) as writer:
            for i in range(COUNT):
                writer.write(mds_sample(i))
    assert ('shard.00003.mds' if failing == 'shard' else 'index.json') in str(info.value)
    assert check_remote(s3.server, f'{s3.prefix}/failing') is None
    index = check_local(local)  # a local index, if any, names only files that are there
    assert index is None or keep_local
    proxy.clear()
    with MDSWriter(out=(local, s3.url('failing')), columns=columns_of('mds'), size_limit=1 << 10, exist_ok=True,
                   storage_options=s3.via(proxy.url)) as writer:
        for i in range(COUNT):
            writer.write(mds_sample(i))
    assert check_remote(s3.server, f'{s3.prefix}/failing') is not None
    assert ids_in(s3.url('failing'), str(tmp_path / 'read'), s3.options) == list(range(COUNT))
