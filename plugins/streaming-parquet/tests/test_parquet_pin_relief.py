"""Idle random access gives its pins up to a reader of another cache account of the same directory.

A second dataset of a Parquet directory with ``columns=`` (or after a file changed) has its own cache account, but
the files it cannot evict are the ones the first dataset's ``ds[i]`` left pinned. The idle reader used to watch only
its own account, so the second waited for the cache's timeout and failed with ``CacheLimitError`` (a review: 270 s);
a wait now marks the node, whatever the account."""

from __future__ import annotations

import os
import threading
import time

import pytest

pa = pytest.importorskip('pyarrow')
pq = pytest.importorskip('pyarrow.parquet')

from streaming_core import StreamingDataset  # noqa: E402


@pytest.mark.parametrize('change', ['columns', 'file-replaced'])
def test_idle_random_access_gives_its_pins_to_another_account(tmp_path, change):
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    os.makedirs(remote)

    def put(name, ids):
        pq.write_table(pa.table({'id': list(ids), 'pad': [os.urandom(4000) for _ in ids]}),
                       os.path.join(remote, name), compression='NONE')
    for f in range(6):
        put(f'p-{f}.parquet', range(f * 20, f * 20 + 20))
    limit = int(2.5 * os.path.getsize(os.path.join(remote, 'p-0.parquet')))
    first = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5)
    assert sorted(int(first[i]['id']) for i in range(len(first))) == list(range(120))  # its last files stay pinned
    time.sleep(1.5)  # idle
    options = {'columns': ['id']}
    if change == 'file-replaced':
        put('p-5.parquet', range(500, 520))
        options = {}
    second = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=limit, download_timeout=5,
                              **options)
    found: list = []
    started = time.monotonic()
    thread = threading.Thread(target=lambda: found.append(sorted(int(s['id']) for s in second)), daemon=True)
    thread.start()
    thread.join(120)
    seconds = time.monotonic() - started
    assert found, 'the second reader did not finish its epoch'
    expected = list(range(120)) if change == 'columns' else list(range(100)) + list(range(500, 520))
    assert found[0] == expected
    assert seconds < 15, f'the reader short of room waited {seconds:.0f} s for the idle random access'
