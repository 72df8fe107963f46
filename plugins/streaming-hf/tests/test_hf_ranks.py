"""Ranks of one job started separately, each resolving an ``hf://`` branch: a push between their starts gives them
different commits, and the job stops with ``DatasetVersionError`` instead of cutting the ranks' shares from
different file lists (real rank processes in a gloo group, against the loopback Hub)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from streaming_hf.testing import HubServer
from tests.deps import require
from tests.multiproc import run_two_ranks_across_a_change

pytestmark = pytest.mark.timeout(300)


def _parquet(ids: list[int]) -> bytes:
    require('pyarrow')
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    out = io.BytesIO()
    pq.write_table(pa.table({'id': ids}), out, row_group_size=10)
    return out.getvalue()


def test_ranks_resolving_a_branch_across_a_push_stop_with_an_error(hub: HubServer, tmp_path: Any) -> None:
    """(Ranks on one version read every sample once: ``tests/test_rank_versions.py``.)"""
    repo = hub.state.repo('datasets', 'owner/name')
    repo.push({f'data/train-{i}.parquet': _parquet(list(range(i * 20, i * 20 + 20))) for i in range(2)})
    results = run_two_ranks_across_a_change(
        tmp_path, {'remote': 'hf://datasets/owner/name/data', 'local': str(tmp_path / 'local')}, 'before', 0, None,
        change=lambda: repo.push({'data/train-2.parquet': _parquet(list(range(40, 60)))}))
    first, second = results
    assert 'error' not in first and sorted(first['ids']) == sorted(set(first['ids'])) and first['len'] == 20
    name, message = second['error']  # rank 0 read its commit's share; rank 1, on the next commit, refused to start
    assert name == 'DatasetVersionError', second
    assert 'Rank 1 reads another version of the dataset than rank 0' in message
    assert 'hf://datasets/owner/name/data' in message and 'name a commit' in message


def test_a_job_stops_when_a_later_job_on_its_cache_reads_a_newer_commit(hub: HubServer, tmp_path: Any) -> None:
    """Two jobs on one local directory, a push between their starts (the files keep their names and row counts):
    the earlier job stops with ``DatasetVersionError`` rather than read the later commit's files."""
    from streaming_core import StreamingDataset
    from streaming_core.errors import DatasetVersionError
    from streaming_hf.testing import forget_process_state
    repo = hub.state.repo('datasets', 'owner/name')
    repo.push({f'data/train-{i}.parquet': _parquet(list(range(i * 20, i * 20 + 20))) for i in range(4)})
    local = str(tmp_path / 'shared')
    first = StreamingDataset(remote='hf://datasets/owner/name/data', local=local, batch_size=4, shuffle=True,
                             cache_limit='40kb', predownload=4)
    samples = iter(first)
    ids = [int(next(samples)['id']) for _ in range(6)]
    repo.push({f'data/train-{i}.parquet': _parquet(list(range(1000 + i * 20, 1000 + i * 20 + 20))) for i in range(4)})
    forget_process_state()  # the later job: a new process resolves the branch again
    later = StreamingDataset(remote='hf://datasets/owner/name/data', local=local, batch_size=4, cache_limit='40kb')
    assert sorted(int(s['id']) for s in later) == list(range(1000, 1080))
    try:
        ids += [int(s['id']) for s in samples]
    except DatasetVersionError as err:
        assert 'changed while this job read it' in str(err)
    else:
        assert sorted(ids) == list(range(80))  # every file it needed was still open
    assert all(i < 80 for i in ids), 'a row of the later commit was served under the earlier index'


def test_forkserver_workers_read_the_commit_their_dataset_pinned(hub: HubServer, tmp_path: Any) -> None:
    """A forkserver started before a dataset pinned its branch's commit (an earlier loader started it): its
    DataLoader workers inherit the server's environment, which lacks the pin, so they resolved the branch again and
    read the next commit's files (same names, other ids) under the first commit's index, with no error. The pin
    now travels with the pickled dataset."""
    import multiprocessing
    import multiprocessing.forkserver

    from streaming_core import StreamingDataLoader, StreamingDataset
    from tests.fixtures.data import write_mds
    server = multiprocessing.forkserver._forkserver
    server._stop()  # one of an earlier test would hold another HF_ENDPOINT
    try:
        multiprocessing.forkserver.ensure_running()  # started now: this Hub, no pin yet
        for kind in ('mds', 'parquet'):
            repo = hub.state.repo('datasets', f'owner/{kind}')
            if kind == 'parquet':
                url = 'hf://datasets/owner/parquet/data'
                versions = [{f'data/train-{i}.parquet': _parquet(list(range(base + i * 20, base + i * 20 + 20)))
                             for i in range(3)} for base in (0, 1000)]
            else:
                url = 'hf://datasets/owner/mds/mds'
                versions = []
                for base in (0, 1000):
                    out = write_mds(str(tmp_path / f'mds-{base}'), 60, start=base, size_limit=600)
                    versions.append({f'mds/{name}': open(os.path.join(out, name), 'rb').read()
                                     for name in sorted(os.listdir(out))})
            repo.push(versions[0])
            dataset = StreamingDataset(remote=url, local=str(tmp_path / kind), batch_size=4, shuffle=True)
            repo.push(versions[1])  # the branch moves on before the loader starts
            loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2,
                                         multiprocessing_context=multiprocessing.get_context('forkserver'))
            assert sorted(int(i) for batch in loader for i in batch['id']) == list(range(60)), kind
            assert sorted(int(dataset[i]['id']) for i in range(len(dataset))) == list(range(60)), kind
    finally:
        server._stop()  # later tests start their own, with their environment


_UNPICKLER = r'''
import os, pickle, sys
from streaming_core import StreamingDataset
case, work = sys.argv[1:3]
load = lambda name: pickle.load(open(os.path.join(work, name + '.pkl'), 'rb'))
if case == 'newer-first':  # pinned the branch's newer commit (a dataset of its own), then gets an older one
    StreamingDataset(remote='hf://datasets/owner/pinmix/mds', local=os.path.join(work, 'own'), batch_size=8)[0]
    dataset = load('older')
else:  # this process read from an older dataset first (its commit), then gets one built after the push
    older = load('older')
    older[len(older) - 1]
    dataset = load('newer')
print(' '.join(str(int(sample['id'])) for sample in dataset))
'''


@pytest.mark.parametrize('case', ['newer-first', 'older-first'])
def test_a_pickled_dataset_reads_its_own_commit_in_a_process_that_pinned_another(hub: HubServer, tmp_path: Any,
                                                                               case: str) -> None:
    """A process (a reused Ray worker, an executor) holding datasets of one branch built before and after a push:
    the branch's pin was per process, so one of them read the other commit's files (same names, MDS without
    hashes) under its own index, with no error. Each stream now downloads from its remote pinned to its index's
    commit, and carries that in its pickle."""
    import pickle
    import subprocess
    import sys

    from streaming_core import StreamingDataset
    from streaming_hf.testing import forget_process_state
    from tests.fixtures.data import write_mds
    repo = hub.state.repo('datasets', 'owner/pinmix')

    def version(base: int) -> dict[str, bytes]:
        out = write_mds(str(tmp_path / f'v{base}'), 120, start=base, size_limit=600)
        return {f'mds/{name}': open(os.path.join(out, name), 'rb').read() for name in sorted(os.listdir(out))}

    url = 'hf://datasets/owner/pinmix/mds'
    repo.push(version(0))
    older = StreamingDataset(remote=url, local=str(tmp_path / 'older'), batch_size=8)
    pickle.dump(older, open(tmp_path / 'older.pkl', 'wb'))
    repo.push(version(1000))
    forget_process_state()  # as a new process: the branch resolves to the new commit
    newer = StreamingDataset(remote=url, local=str(tmp_path / 'newer'), batch_size=8)
    pickle.dump(newer, open(tmp_path / 'newer.pkl', 'wb'))
    env = {k: v for k, v in os.environ.items() if not k.startswith('STREAMING_HF_PIN_')}
    env['PYTHONPATH'] = os.pathsep.join(p for p in (os.getcwd(), env.get('PYTHONPATH')) if p)
    done = subprocess.run([sys.executable, '-c', _UNPICKLER, case, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = sorted(int(i) for i in done.stdout.split())
    expected = list(range(0, 120)) if case == 'newer-first' else list(range(1000, 1120))
    assert ids == expected, f'{case}: served {sorted({i // 1000 for i in ids})} thousands'
