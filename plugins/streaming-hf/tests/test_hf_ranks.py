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


@pytest.mark.parametrize('pushed', [True, False])
def test_ranks_resolving_a_branch_across_a_push_stop_with_an_error(hub: HubServer, tmp_path: Any, pushed) -> None:
    repo = hub.state.repo('datasets', 'owner/name')
    repo.push({f'data/train-{i}.parquet': _parquet(list(range(i * 20, i * 20 + 20))) for i in range(2)})
    push = (lambda: repo.push({'data/train-2.parquet': _parquet(list(range(40, 60)))})) if pushed else None
    results = run_two_ranks_across_a_change(
        tmp_path, {'remote': 'hf://datasets/owner/name/data', 'local': str(tmp_path / 'local')}, 'before', 0, None,
        change=push)
    first, second = results
    assert 'error' not in first and sorted(first['ids']) == sorted(set(first['ids'])) and first['len'] == 20
    if pushed:  # rank 0 read its commit's share; rank 1, on the next commit, refused to start
        name, message = second['error']
        assert name == 'DatasetVersionError', second
        assert 'Rank 1 reads another version of the dataset than rank 0' in message
        assert 'hf://datasets/owner/name/data' in message
    else:
        assert 'error' not in second
        assert sorted(first['ids'] + second['ids']) == list(range(40))
