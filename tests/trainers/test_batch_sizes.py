"""Issue 13 item 0: the loader's and the dataset's batch sizes, following the user's steps in fresh processes: read 5
batches with 2 workers, save the loader's state, resume in a new process."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes



@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return harness.make_dataset(str(tmp_path_factory.mktemp('batch-sizes')))


def _read(tmp_path, name, **config):
    out = str(tmp_path / f'{name}.json')
    harness.run([sys.executable, '-m', 'tests.trainers.loader_client', json.dumps(dict(config, out=out))])
    with open(out) as handle:
        return out, json.load(handle)


def test_a_dataset_without_batch_size_adopts_the_loaders_and_resumes_exactly(data, tmp_path):
    common = dict(data=data, dataset_batch=None, loader_batch=64, workers=2)
    _, full = _read(tmp_path, 'full', **common, stop=None)
    state, first = _read(tmp_path, 'first', **common, stop=5)
    _, rest = _read(tmp_path, 'rest', **common, stop=None, state=state)
    assert first['state']['sample_in_epoch'] == 5 * 64
    assert first['ids'] + rest['ids'] == full['ids']
    assert sorted(full['ids']) == list(range(harness.SAMPLES))


@pytest.mark.parametrize('dataset_batch, loader_batch', [(32, 64), (64, 10)])
def test_different_sizes_with_workers_are_refused_before_the_first_sample(data, tmp_path, dataset_batch,
                                                                           loader_batch):
    with pytest.raises(AssertionError) as failed:
        _read(tmp_path, 'refused', data=data, dataset_batch=dataset_batch, loader_batch=loader_batch, workers=2,
              stop=5)
    message = str(failed.value)
    assert f'batch_size={loader_batch}' in message and f'batch_size={dataset_batch}' in message, message[-2000:]
    assert not os.path.exists(tmp_path / 'refused.json')
