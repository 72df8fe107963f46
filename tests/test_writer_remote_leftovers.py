"""A writer refuses a remote output that already holds objects (a killed writer's shards) unless exist_ok."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.data import write_mds


def test_remote_leftovers_refused_without_exist_ok(tmp_path):
    remote = tmp_path / 'remote'
    remote.mkdir()
    (remote / 'shard.00000.mds').write_bytes(b'left by a writer that was killed')
    out = (str(tmp_path / 'staging'), f'file://{remote}')
    with pytest.raises(FileExistsError, match='not empty.*shard.00000.mds'):
        write_mds(out, 10)
    write_mds((str(tmp_path / 'staging2'), f'file://{remote}'), 10, exist_ok=True)
    assert os.path.exists(remote / 'index.json')
