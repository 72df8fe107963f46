"""Lightning's ``Trainer.fit`` on CPU over Parquet files written by pyarrow (several files of several row groups,
read in place: no ``index.json``, the index derived from the files), with the DataModule of
``docs/guide/lightning.md``: a fresh job resumed from the checkpoint Lightning saved at the end of epoch 0 trains on
exactly the samples the uninterrupted run trained on in epoch 1, in the same batches.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.deps import require
from tests.trainers import formats_data, harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes

EPOCHS = 2
#: One process: its batch is the 2-rank trainers' global batch, so an epoch has the same number of steps.
BATCH = 2 * harness.PER_DEVICE
STEPS = harness.STEPS_PER_EPOCH


def _fit(config: dict) -> None:
    harness.run([sys.executable, '-m', 'tests.trainers.lightning_client', json.dumps(config)])


def test_lightning_resumes_a_parquet_stream_from_its_epoch_end_checkpoint(tmp_path) -> None:
    for module in ('lightning', 'pyarrow', 'streaming_parquet'):
        require(module)
    data = str(tmp_path / 'data')
    formats_data.write_parquet_ids(os.path.join(data, 'train'), 0, harness.SAMPLES, files=4, row_group=50)
    formats_data.write_parquet_ids(os.path.join(data, 'val'), harness.SAMPLES, harness.VAL_SAMPLES, files=1,
                                   row_group=30)
    assert not any(name.endswith('.json') for name in os.listdir(os.path.join(data, 'train')))
    config = dict(data=data, run=str(tmp_path / 'baseline'), strategy='auto', devices=1, epochs=EPOCHS, batch=BATCH,
                  workers=1, save=True)
    _fit(config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    assert [len([b for b in log[0] if b['epoch'] == epoch]) for epoch in range(EPOCHS)] == [STEPS] * EPOCHS
    assert harness.epoch_ids(log, 0) != harness.epoch_ids(log, 0, before=1)  # shuffled, several batches
    ckpt = os.path.join(config['run'], 'epochs', 'epoch=0.ckpt')
    resumed = dict(config, run=str(tmp_path / 'resumed'), ckpt=ckpt, save=False)
    _fit(resumed)
    harness.assert_exact_resume(log, harness.read_log(resumed['run']), STEPS, EPOCHS,
                                'Lightning on Parquet from its epoch-end checkpoint')
