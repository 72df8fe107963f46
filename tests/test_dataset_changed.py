"""A dataset rewritten while a job reads it: the job stops with ``DatasetVersionError`` before reading a file of the
new version, instead of serving the new version's samples under its old index.

Job A reads part of an epoch; the data is rewritten with the same file names and sizes (other sample ids); job B
starts on the same local directory (its construction refreshes the directory for the new version) and reads it.
Before, A went on with B's files: most of its epoch came from the new version, with no error.
"""

from __future__ import annotations

import time

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import DatasetVersionError
from tests.fixtures.data import write_mds


def _read_until_error(samples):
    """The ids read, and the error's message (None when the epoch ended: every file it read was still open)."""
    ids = []
    try:
        for sample in samples:
            ids.append(int(sample['id']))
    except DatasetVersionError as err:
        assert 'changed while this job read it' in str(err)
        return ids, str(err)
    return ids, None


@pytest.mark.parametrize('cache_limit', [None, '20kb'])
def test_a_job_stops_when_another_job_refreshes_its_directory_for_a_new_version(tmp_path, cache_limit):
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_mds(remote, 200, size_limit=1 << 9, hashes=['sha1'])  # 34 shards
    a = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, cache_limit=cache_limit,
                         predownload=8)
    samples = iter(a)
    first = [int(next(samples)['id']) for _ in range(30)]
    time.sleep(1)  # A's prefetcher has prepared its window (8 samples ahead): it does not download mid-rewrite
    write_mds(remote, 200, start=1000, size_limit=1 << 9, hashes=['sha1'], exist_ok=True)  # same names and sizes
    b = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=cache_limit)
    assert sorted(int(s['id']) for s in b) == list(range(1000, 1200))
    rest, message = _read_until_error(samples)
    assert all(i < 200 for i in first + rest), 'a sample of the new version was served under the old index'
    if message is None:  # every shard it still needed was open (mapped: the old files) before the rewrite
        assert sorted(first + rest) == list(range(200))
    else:
        assert remote in message and local in message and 'Restart the job' in message


def test_a_local_dataset_rewritten_in_place_between_epochs_stops_the_job(tmp_path):
    data = str(tmp_path / 'data')
    write_mds(data, 200, size_limit=1 << 11)
    a = StreamingDataset(local=data, batch_size=4, shuffle=True)
    assert sorted(int(s['id']) for s in a) == list(range(200))
    write_mds(data, 200, start=1000, size_limit=1 << 11, exist_ok=True)
    ids, message = _read_until_error(iter(a))
    assert all(i < 200 for i in ids) and message is not None and 'index.json was rewritten' in message
    again = StreamingDataset(local=data, batch_size=4)  # a new dataset reads the new version
    assert sorted(int(s['id']) for s in again) == list(range(1000, 1200))
