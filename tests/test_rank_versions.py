"""Ranks of one job reading different versions of a dataset: an error, never lost or repeated samples.

Real rank processes in a gloo process group (torchrun's environment), the dataset rewritten between the first rank's
construction and the second's, as happens when a job starts while ``index.json`` is replaced or an ``hf://`` branch
gets a push.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.fixtures.data import write_mds
from tests.multiproc import ROOT, free_port

pytestmark = pytest.mark.timeout(300)


def _run(tmp: Any, remote: str, init: str, workers: int, context: str | None, rewrite: int | None) -> list[dict]:
    """Start ranks 0 and 1; rank 1 constructs only after rank 0 has, and after the test rewrote the dataset with
    ``rewrite`` samples (None: not rewritten). Returns each rank's output."""
    built, go = str(tmp / 'rank0-built'), str(tmp / 'rank1-go')
    config = {'init': init, 'workers': workers, 'context': context,
              'dataset': {'remote': remote, 'local': str(tmp / 'local'), 'batch_size': 4, 'shuffle': True,
                          'shuffle_seed': 7},
              'ranks': {'0': {'built': built, 'iterate': rewrite is None or init == 'after'}, '1': {'wait': go}}}
    port = free_port()
    procs, outs = [], []
    for rank in range(2):
        out = str(tmp / f'rank{rank}.json')
        outs.append(out)
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE='2', LOCAL_WORLD_SIZE='2', LOCAL_RANK=str(rank),
                   MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
        procs.append(subprocess.Popen([sys.executable, '-m', 'tests.workers.version_rank', json.dumps(config), out],
                                      env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(built):
            assert procs[0].poll() is None, procs[0].communicate()[0].decode(errors='replace')[-3000:]
            assert time.monotonic() < deadline, 'rank 0 never constructed its dataset'
            time.sleep(0.05)
        if rewrite is not None:
            write_mds(remote, rewrite, exist_ok=True)
        open(go, 'w').close()
        logs = [proc.communicate(timeout=240)[0].decode(errors='replace') for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    results = []
    for proc, out, log in zip(procs, outs, logs):
        assert proc.returncode == 0, log[-3000:]
        with open(out) as handle:
            results.append(json.load(handle))
    return results


@pytest.mark.parametrize('init, workers, context', [
    ('before', 0, None),        # the group exists at construction: the second rank's constructor raises
    ('after', 2, 'fork'),       # a DataModule built before the group: the forked workers raise what the rank found
    ('after', 2, 'spawn'),      # pickled for spawned workers: the rank's main process raises
])
def test_ranks_on_different_versions_of_a_dataset_stop_with_an_error(tmp_path, init, workers, context):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    results = _run(tmp_path, remote, init, workers, context, rewrite=48)
    assert results[0]['len'] == 20
    if init == 'before':  # rank 0 compared at construction, before the rewrite: its version is the job's
        assert results[0] == {'len': 20}, results[0]  # (its files were rewritten under it: it does not read)
        late, first = 1, 0
    else:  # compared once the group exists, in whichever order the ranks get there; the other rank's version
        late = next(i for i, r in enumerate(results) if r.get('error', [''])[0] == 'DatasetVersionError')
        first = 1 - late
        assert results[1]['len'] == 24
    name, message = results[late]['error']
    assert name == 'DatasetVersionError', results
    assert f'Rank {late} reads another version of the dataset than rank {first}' in message
    assert remote in message and 'hf://' in message


@pytest.mark.parametrize('init', ['before', 'after'])
def test_ranks_on_one_version_read_every_sample_once(tmp_path, init):
    remote = write_mds(str(tmp_path / 'remote'), 40)
    results = _run(tmp_path, remote, init, 2, 'fork', rewrite=None)
    ids = [i for result in results for i in result['ids']]
    assert all('error' not in result for result in results), results
    assert sorted(ids) == list(range(40))
