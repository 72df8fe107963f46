"""The warning where forked DataLoader workers can hang at start (CPython gh-112275): on which Pythons, when (a
process group is active), and once per process, through a user's DataLoader."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streaming_core.machinery.fork_hazard import affected
from tests.fixtures.data import write_mds


@pytest.mark.parametrize('version, implementation, expected', [
    ((3, 8, 18), 'cpython', True), ((3, 8, 20), 'cpython', False), ((3, 9, 19), 'cpython', True),
    ((3, 9, 20), 'cpython', False), ((3, 10, 13), 'cpython', True), ((3, 10, 15), 'cpython', False),
    ((3, 11, 7), 'cpython', True), ((3, 11, 9), 'cpython', True), ((3, 11, 10), 'cpython', False),
    ((3, 12, 0), 'cpython', False), ((3, 13, 1), 'cpython', False), ((3, 11, 7), 'pypy', False),
])
def test_which_pythons_are_affected(version, implementation, expected):
    assert affected(version, implementation) is expected


CLIENT = r'''
import json, os, sys, warnings
import torch.distributed as dist
from torch.utils.data import DataLoader
from streaming_core import StreamingDataset
from streaming_core.machinery.fork_hazard import ForkDeadlockWarning


def count(caught):
    return [str(w.message) for w in caught if issubclass(w.category, ForkDeadlockWarning)]


def epoch(data, **kwargs):
    ids = []
    for batch in DataLoader(StreamingDataset(local=data, batch_size=4), batch_size=4, num_workers=2, **kwargs):
        ids += batch['id'].tolist()
    return sorted(ids)


if __name__ == '__main__':
    data, store = sys.argv[1], sys.argv[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        first = epoch(data)  # no process group: nothing to warn about
        without = count(caught)
        dist.init_process_group('gloo', init_method=f'file://{store}', rank=0, world_size=1)
        server = epoch(data, multiprocessing_context='forkserver')  # this process does not fork: no warning
        with_server = count(caught)
        second, third = epoch(data), epoch(data)  # four forks with a process group
        with_group = count(caught)
    dist.destroy_process_group()
    print(json.dumps({'without': without, 'forkserver': with_server, 'with': with_group,
                      'ids': [first == server == second == third, len(first)]}))
'''


def test_a_user_dataloader_under_a_process_group_warns_once(tmp_path):
    data = write_mds(str(tmp_path / 'data'), 40)
    script = tmp_path / 'client.py'
    script.write_text(CLIENT)
    out = subprocess.run([sys.executable, str(script), data, str(tmp_path / 'store')], capture_output=True, text=True,
                         timeout=240, cwd=str(tmp_path), env={**os.environ, 'PYTHONWARNINGS': ''})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result['ids'] == [True, 40]
    assert result['without'] == [] and result['forkserver'] == []
    if affected():
        assert len(result['with']) == 1, result
        message = result['with'][0]
        major, minor, micro = sys.version_info[:3]
        assert f'Python {major}.{minor}.{micro}' in message and 'gh-112275' in message
        assert 'multiprocessing_context="forkserver"' in message
    else:
        assert result['with'] == []
