"""Epoch plan files in the user cache are bounded (issue 12 item 11), never removing a plan a live process holds."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from streaming_core import StreamingDataset
from streaming_core.common.paths import coordination_dir
from streaming_core.ordering import plan_cache as plans
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HOLDER = '''
import os, sys
from streaming_core.ordering import plan_cache as plans
from streaming_core.storage.locking import RangeLocks
directory, key = sys.argv[1], sys.argv[2]
plans._hold(RangeLocks.for_path(os.path.join(directory, 'plans.lock')), key)
print('holding', flush=True)
sys.stdin.read()  # until the test closes stdin
'''


def _fake_plans(directory: str, count: int) -> list[str]:
    """``count`` plan files, the first the least recently used."""
    keys = [f'{i:032x}' for i in range(count)]
    now = time.time()
    for age, key in zip(range(count, 0, -1), keys):
        path = os.path.join(directory, f'{key}.npy')
        np.save(path, np.arange(4, dtype=np.int64))
        os.utime(path, (now - age * 60, now - age * 60))
    return keys


def _present(directory: str) -> set[str]:
    return {name[:-4] for name in os.listdir(directory) if name.endswith('.npy')}


def test_prune_keeps_the_newest_and_any_plan_a_live_process_holds(tmp_path, monkeypatch):
    directory = str(tmp_path / 'plans')
    os.makedirs(directory)
    keys = _fake_plans(directory, 10)
    old = os.path.join(directory, f'{keys[8]}.npy')
    os.utime(old, (time.time() - plans.MAX_PLAN_AGE - 60,) * 2)  # recent by rank, but unused for too long
    holder = subprocess.Popen([sys.executable, '-c', HOLDER, directory, keys[0]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env={**os.environ, 'PYTHONPATH': ROOT})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == 'holding'
        monkeypatch.setattr(plans, 'MAX_PLANS', 3)
        removed = plans.prune_plans(directory)
        assert _present(directory) == {keys[0], keys[9], keys[7], keys[6]}
        assert removed == 6
    finally:
        holder.communicate(input='', timeout=60)
    assert holder.returncode == 0
    plans.prune_plans(directory)  # the holder is gone: its plan goes too
    assert _present(directory) == {keys[9], keys[7], keys[6]}


def test_many_epochs_leave_a_bounded_number_of_plan_files(tmp_path, monkeypatch):
    monkeypatch.setattr(plans, 'MAX_PLANS', 4)
    monkeypatch.setattr(plans, 'PLANS_HELD_PER_PROCESS', 2)
    remote = write_mds(str(tmp_path / 'remote'), 40)
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=4, shuffle=True,
                               num_canonical_nodes=1)
    directory = coordination_dir('plans')
    seen = 0
    for _ in range(12):
        assert sorted(int(s['id']) for s in dataset) == list(range(40))
        seen = max(seen, len(_present(directory)))
    assert 1 <= len(_present(directory)) <= 4 and seen <= 4


LOADER = '''
import sys
from streaming_core import StreamingDataset
dataset = StreamingDataset(local=sys.argv[1], batch_size=4, shuffle=True, num_canonical_nodes=1)
assert sorted(int(s['id']) for s in dataset) == list(range(40))
print('read', flush=True)
sys.stdin.read()  # until the test closes stdin
'''


def test_a_process_that_only_loaded_a_plan_holds_it(tmp_path):
    """A DataLoader worker loads the plan another process computed (the fast path): it must mark it in use too, so
    pruning keeps it while that process lives (docs/guide/cache.md)."""
    data = write_mds(str(tmp_path / 'data'), 40)
    env = {**os.environ, 'PYTHONPATH': ROOT}
    subprocess.run([sys.executable, '-c', LOADER, data], input='', text=True, env=env, check=True, timeout=120,
                   capture_output=True)  # computes the plan, then exits
    directory = coordination_dir('plans')
    (key,) = _present(directory)
    loader = subprocess.Popen([sys.executable, '-c', LOADER, data], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert loader.stdout is not None and loader.stdout.readline().strip() == 'read'
        path = os.path.join(directory, f'{key}.npy')
        os.utime(path, (time.time() - plans.MAX_PLAN_AGE - 60,) * 2)  # unused for too long: pruned unless held
        plans.prune_plans(directory)
        assert _present(directory) == {key}
    finally:
        loader.communicate(input='', timeout=60)
    plans.prune_plans(directory)
    assert _present(directory) == set()
