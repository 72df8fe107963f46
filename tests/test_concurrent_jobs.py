"""Two jobs at once on one cache directory (the reference's "Reused local directory" never happens)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.data import write_mds
from tests.multiproc import ROOT


def _run_jobs(configs, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    procs = []
    for i, config in enumerate(configs):
        out = tmp_path / f'job{i}.json'
        procs.append((out, subprocess.Popen([sys.executable, '-m', 'tests.workers.reader', json.dumps(config),
                                             str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT)))
    results = []
    for out, proc in procs:
        log, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, log.decode()[-3000:]
        results.append(json.loads(out.read_text()))
    return results


@pytest.mark.slow
@pytest.mark.parametrize('cache_limit', [None, '30kb'])
def test_two_jobs_share_one_cache_directory(tmp_path, cache_limit):
    remote = write_mds(str(tmp_path / 'remote'), 400, size_limit=1 << 10, sample_size=64)
    local = str(tmp_path / 'shared-cache')
    base = {'remote': remote, 'local': local, 'batch_size': 4, 'shuffle': True, 'cache_limit': cache_limit}
    configs = [{'dataset': dict(base, shuffle_seed=1), 'workers': 2},
               {'dataset': dict(base, shuffle_seed=2), 'workers': 0}]
    results = _run_jobs(configs, tmp_path)
    for result in results:
        assert result['done'] and sorted(result['ids']) == list(range(400))
    assert results[0]['ids'] != results[1]['ids']
    assert not [n for n in os.listdir(local) if n.endswith('.tmp')]
