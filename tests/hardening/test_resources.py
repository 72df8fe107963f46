"""Long-running processes: creating and dropping datasets must not accumulate operating-system resources (the
reference's "Too many open files" after many ``StreamingDataset`` instantiations, user pain MS-12)."""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest

from streaming_core import StreamingDataset
from tests.fixtures.data import write_mds


def _open_fds() -> int:
    return len(os.listdir('/proc/self/fd'))


@pytest.mark.parametrize('iterate', [False, True])
def test_datasets_release_their_file_descriptors(tmp_path: Any, iterate: bool) -> None:
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=1 << 10)
    dataset = StreamingDataset(local=local, batch_size=1)
    list(dataset)
    del dataset
    gc.collect()
    before = _open_fds()
    for _ in range(100):
        dataset = StreamingDataset(local=local, batch_size=1)
        if iterate:
            assert len(list(dataset)) == 40
        del dataset
    gc.collect()
    assert _open_fds() - before < 5, f'{_open_fds() - before} file descriptors left open by 100 dropped datasets'
