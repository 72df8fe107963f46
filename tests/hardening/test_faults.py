"""Faults survived, permanent faults reported fast: a fault-injecting proxy in front of the loopback S3 server.

Transient faults (5xx answers, connection resets, stalls past the request timeout, bodies cut short) hit a
random share of the downloads of a 2-rank x 2-worker job: training completes, every sample is delivered exactly as
planned with the right bytes (with ``--soak``: more faults, under constant eviction). A permanent fault on one
shard ends training with an error raised in the training loop that names the shard, after exactly the configured
attempts (one for access denied), within the time those attempts allow, after every sample before that shard was
delivered.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset, World
from streaming_core.errors import StreamingError
from tests.fixtures.data import write_mds
from tests.hardening.conftest import S3Place
from tests.hardening.harness import Job, random_fault_proxy, read_json

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SAMPLES = 360
TIMEOUT = 1.5      # download_timeout: a stall of 3 s is past it
RETRY = 2          # download_retry: 3 attempts
BACKOFF_MAX = 0.5 * (1 + 2) + 2 * 0.25   # the sleeps between 3 attempts, jitter included


@pytest.fixture
def remote(s3: S3Place) -> str:
    return write_mds(s3.url('ds'), SAMPLES, sample_size=64, size_limit=1 << 10, storage_options=s3.options)


def _random_faults(tmp_path: Any, s3: S3Place, remote: str, *, seed: int, rate: float, epochs: int,
                   cache_shards: int | None) -> Any:
    proxy = random_fault_proxy(s3.server, seed=seed, rate=rate, stall_seconds=2 * TIMEOUT)
    try:
        args: dict[str, Any] = {'batch_size': 5, 'shuffle': True, 'shuffle_seed': 3, 'num_canonical_nodes': 1,
                                'download_timeout': TIMEOUT, 'download_retry': 3, 'predownload': 20}
        reference = StreamingDataset(streams=[Stream(remote=remote, local=str(tmp_path / 'plan'),
                                                     storage_options=s3.options)], **args)
        plans = [reference.get_plan(World(world_size=2, local_world_size=2, workers_per_rank=2), epoch)
                 for epoch in range(epochs)]
        if cache_shards is not None:
            args['cache_limit'] = reference._index_bytes + cache_shards * max(r.max_size for r in reference.shards)
        config = {'streams': [{'remote': remote, 'local': str(tmp_path / 'local'),
                               'storage_options': s3.via(proxy.url)}],
                  'dataset': args, 'workers': 2, 'epochs': epochs, 'check_data': True}
        results = Job(str(tmp_path), 1, 2, lambda node: config).results(timeout=240 * epochs)
    finally:
        proxy.stop()
    for epoch in range(epochs):
        delivered = collections.Counter(i for r in results for batch in r['epochs'][str(epoch)] for i in batch)
        plan = plans[epoch]
        assert delivered == collections.Counter(plan[plan >= 0].ravel().tolist()), f'epoch {epoch}'
        assert len({len(r['epochs'][str(epoch)]) for r in results}) == 1
    assert all(r['mismatches'] == [] for r in results)
    assert set(proxy.injected) == {'status', 'reset', 'stall', 'truncate'}, proxy.injected
    return proxy


def test_random_transient_faults_are_survived_with_correct_data(tmp_path: Any, s3: S3Place, remote: str) -> None:
    _random_faults(tmp_path, s3, remote, seed=8, rate=0.3, epochs=2, cache_shards=None)


@pytest.mark.soak
@pytest.mark.timeout(1800)
@pytest.mark.parametrize('seed', range(3))
def test_soak_random_faults_under_constant_eviction(tmp_path: Any, s3: S3Place, remote: str, seed: int) -> None:
    proxy = _random_faults(tmp_path, s3, remote, seed=seed, rate=0.35, epochs=3, cache_shards=10)
    assert sum(proxy.injected.values()) >= 50, proxy.injected


FAULTS = {
    '503': lambda proxy, path: proxy.fail(None, 503, method='GET', path=path),
    'reset': lambda proxy, path: proxy.reset(None, method='GET', path=path),
    'stall-before': lambda proxy, path: proxy.stall(None, seconds=30, phase='before', method='GET', path=path),
    'stall-body': lambda proxy, path: proxy.stall(None, seconds=30, phase='body', method='GET', path=path),
    'truncate': lambda proxy, path: proxy.truncate(None, keep=0.5, method='GET', path=path),
    '403': lambda proxy, path: proxy.fail(None, 403, method='GET', path=path),
}


@pytest.mark.parametrize('fault', list(FAULTS))
def test_permanent_fault_fails_fast_in_the_loop_naming_the_shard(tmp_path: Any, s3: S3Place, remote: str,
                                                                 fault_proxy: Any, fault: str) -> None:
    proxy = fault_proxy(s3.server)
    dataset = StreamingDataset(streams=[Stream(remote=remote, local=str(tmp_path / 'local'),
                                               storage_options=s3.via(proxy.url))],
                               batch_size=4, download_timeout=TIMEOUT, download_retry=RETRY, predownload=8)
    bad = 3
    before = int(dataset.samples_per_shard[:bad].sum())
    FAULTS[fault](proxy, rf'/shard\.{bad:05}\.mds')
    delivered = []
    start = time.monotonic()
    with pytest.raises(StreamingError) as info:
        for sample in dataset:  # the training loop
            delivered.append(int(sample['id']))
    elapsed = time.monotonic() - start
    assert f'shard.{bad:05}.mds' in str(info.value)
    assert delivered == list(range(before)), 'every sample before the bad shard, in order, and nothing after it'
    attempts = 1 if fault == '403' else RETRY + 1
    made = proxy.count(method='GET', path=rf'shard\.{bad:05}')
    # A fresh-clone run once saw 2 GETs for 3 attempts of a body stall: an abandoned attempt's removal of its
    # temporary file lost a race with its thread's and ended the retries (test_http_storage.py::
    # test_an_abandoned_attempt_removing_its_file_first_leaves_the_download_retryable).
    assert made == attempts, f'{made} GET(s) of shard {bad} for {attempts} attempts; the error: {info.value!r}'
    bound = attempts * TIMEOUT + BACKOFF_MAX + 10.0  # + start-up and the shards before it, on a busy machine
    assert elapsed < bound, f'{fault}: failed after {elapsed:.1f} s, allowed {bound:.1f} s'


def test_permanent_fault_with_dataloader_workers_is_raised_in_the_training_loop(tmp_path: Any, s3: S3Place,
                                                                                 remote: str,
                                                                                 fault_proxy: Any) -> None:
    proxy = fault_proxy(s3.server)
    proxy.fail(None, 503, method='GET', path=r'/shard\.00005\.mds')
    config = {'streams': [{'remote': remote, 'local': str(tmp_path / 'local'), 'storage_options': s3.via(proxy.url)}],
              'dataset': {'batch_size': 4, 'download_timeout': TIMEOUT, 'download_retry': RETRY, 'predownload': 8},
              'workers': 2, 'epochs': 1, 'init_dist': False}
    job = Job(str(tmp_path), 1, 1, lambda node: config)
    assert job.wait(timeout=120) == [3], job.logs()
    error = read_json(job.output(0))['error']
    assert 'StreamingError' in error['mro'] and 'shard.00005.mds' in error['message'], error
    assert error['seconds'] < 2 * ((RETRY + 1) * TIMEOUT + BACKOFF_MAX) + 15.0, error  # two workers may try
    attempts = proxy.count(method='GET', path=r'shard\.00005')  # each worker that needs it tries on its own
    assert RETRY + 1 <= attempts <= 2 * (RETRY + 1)
