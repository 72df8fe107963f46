"""SIGKILL at a random moment, then restart from the last checkpoint: correct, complete data, no clean-up.

A job of 2 ranks x 2 DataLoader workers streams a dataset from the loopback S3 server under a tight cache limit
(downloads, evictions and cache accounting are in flight all the time) and logs, after every batch, the batch's
sample ids and the loader's ``state_dict()``. We SIGKILL one rank, or one DataLoader worker (its pid recorded by
the worker itself), at a random step; the launcher then kills the rest, as torchrun does. The restart uses the same
cache and local directories untouched and resumes every rank from the last step all ranks completed. Per epoch,
the samples consumed before the kill plus those consumed after the restart are exactly the epoch plan's.
"""

from __future__ import annotations

import collections
import os
import random
import time
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset, World
from tests.fixtures.data import write_mds
from tests.hardening.conftest import S3Place
from tests.hardening.harness import Job, alive, kill, read_json, read_steps, tail, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SAMPLES, EPOCHS, RANKS, WORKERS, BATCH = 240, 2, 2, 2, 4
STEPS_PER_EPOCH = SAMPLES // (RANKS * BATCH)


def _setup(tmp_path: Any, s3: S3Place) -> tuple[dict[str, Any], list[Any]]:
    remote = write_mds(s3.url('ds'), SAMPLES, sample_size=64, size_limit=1 << 10, storage_options=s3.options)
    args: dict[str, Any] = {'batch_size': BATCH, 'shuffle': True, 'shuffle_seed': 5, 'num_canonical_nodes': 1,
                            'download_timeout': 10, 'predownload': 8}
    reference = StreamingDataset(streams=[Stream(remote=remote, local=str(tmp_path / 'plan'),
                                                 storage_options=s3.options)], **args)
    world = World(world_size=RANKS, local_world_size=RANKS, workers_per_rank=WORKERS)
    plans = [reference.get_plan(world, epoch) for epoch in range(EPOCHS)]
    args['cache_limit'] = reference._index_bytes + 8 * max(r.max_size for r in reference.shards)
    pid_dir = tmp_path / 'pids'
    pid_dir.mkdir()
    config = {'streams': [{'remote': remote, 'local': str(tmp_path / 'local'), 'storage_options': s3.options}],
              'dataset': args, 'workers': WORKERS, 'epochs': EPOCHS, 'check_data': True, 'sleep': 0.03,
              'pid_dir': str(pid_dir)}
    return config, plans


def _live_worker_of(pid_dir: str, rank: int) -> int | None:
    for name in sorted(os.listdir(pid_dir)):
        if name.startswith(f'rank{rank}-'):
            pid = int(name.rsplit('-', 1)[1])
            if alive(pid):
                return pid
    return None


def _kill_and_resume(tmp_path: Any, s3: S3Place, victim: str, seed: int) -> None:
    rng = random.Random(seed)
    config, plans = _setup(tmp_path, s3)
    logs = [str(tmp_path / f'steps{rank}-first.jsonl') for rank in range(RANKS)]
    logged = {**config, 'steps_log': str(tmp_path / 'steps{rank}-first.jsonl')}
    first = Job(str(tmp_path), 1, RANKS, lambda node: logged, tag='-first')
    # Mid-epoch, well before its end: a worker killed while its iterator shuts down, or a rank that already
    # finished, would leave nothing to notice. The victim's own progress decides the moment (ranks do not wait
    # for each other).
    victim_rank = 1 if victim == 'rank' else 0
    kill_at = rng.randrange(EPOCHS) * STEPS_PER_EPOCH + rng.randrange(3, STEPS_PER_EPOCH - 10)
    try:
        wait_for(lambda: len(read_steps(logs[victim_rank])) >= kill_at, 120, f'step {kill_at} of rank {victim_rank}',
                 proc=first.procs[victim_rank], log=first.log(victim_rank))
        time.sleep(rng.random() * 0.05)
        if victim == 'rank':
            kill(first.procs[1])
        else:
            wait_for(lambda: _live_worker_of(config['pid_dir'], 0) is not None, 60, 'a live worker of rank 0',
                     proc=first.procs[0], log=first.log(0))
            pid = _live_worker_of(config['pid_dir'], 0)
            assert pid is not None and pid > 1, pid
            os.kill(pid, 9)
            # The worker's death is not silent: rank 0's training loop raises.
            wait_for(lambda: first.procs[0].poll() is not None, 60, 'rank 0 noticing its dead worker')
            error = (read_json(first.output(0)) or {}).get('error') or {}
            if not (first.procs[0].returncode == 3 and 'worker' in error.get('message', '')):
                pytest.fail(f'rank 0 exited {first.procs[0].returncode} with {error}; its log:\n'
                            f'{tail(first.log(0), 8000)}')
    finally:
        first.kill_all()

    steps = [read_steps(log) for log in logs]
    done = min(len(s) for s in steps)  # the last step every rank completed: the checkpoint to resume from
    state = steps[0][done - 1]['state'] if done else None
    for rank in range(RANKS):
        if done:
            assert steps[rank][done - 1]['state'] == state, 'ranks disagree on the checkpoint'
    consumed = {epoch: collections.Counter() for epoch in range(EPOCHS)}
    for rank_steps in steps:
        for step in rank_steps[:done]:
            consumed[step['epoch']].update(step['ids'])

    second = Job(str(tmp_path), 1, RANKS, lambda node: {**config, 'resume': state, 'steps_log': None},
                 tag='-second')
    results = second.results(timeout=240)
    for epoch in range(EPOCHS):
        after = collections.Counter(i for r in results for batch in r['epochs'].get(str(epoch), []) for i in batch)
        plan = plans[epoch]
        expected = collections.Counter(plan[plan >= 0].ravel().tolist())
        total = consumed[epoch] + after
        assert total == expected, (f'seed {seed}, killed {victim} at step {kill_at}, resumed after {done} steps, '
                                   f'epoch {epoch}: missing {dict(expected - total)}, extra {dict(total - expected)}')
    assert all(r['mismatches'] == [] for r in results)
    leftovers = [n for n in os.listdir(tmp_path / 'local') if n.endswith('.tmp')]
    assert not leftovers, f'temporary files of the killed run survived the restart: {leftovers}'


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get('HARDENING_SEED', time.time_ns() % 100_000))
    print(f'HARDENING_SEED={value}')  # shown with a failure: rerun with it to reproduce the kill moment
    return value


def test_sigkill_a_rank_then_resume_from_the_last_state(tmp_path: Any, s3: S3Place, seed: int) -> None:
    _kill_and_resume(tmp_path, s3, 'rank', seed)


def test_sigkill_a_dataloader_worker_then_resume_from_the_last_state(tmp_path: Any, s3: S3Place, seed: int) -> None:
    _kill_and_resume(tmp_path, s3, 'worker', seed)


@pytest.mark.soak
@pytest.mark.timeout(3600)
@pytest.mark.parametrize('victim', ['rank', 'worker'])
@pytest.mark.parametrize('round_', range(10))
def test_soak_sigkill_then_resume(tmp_path: Any, s3: S3Place, victim: str, round_: int) -> None:
    _kill_and_resume(tmp_path, s3, victim, 1000 + round_)
