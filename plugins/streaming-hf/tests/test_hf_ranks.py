"""Ranks of one job started separately, each resolving an ``hf://`` branch: a push between their starts gives them
different commits, and the job stops with ``DatasetVersionError`` instead of cutting the ranks' shares from
different file lists (real rank processes in a gloo group, against the loopback Hub)."""

from __future__ import annotations

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
