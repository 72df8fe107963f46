"""Lightning (``ddp`` and ``ddp_spawn``, 2 CPU processes) resumes exactly from its own checkpoints, with no glue.

One uninterrupted run per strategy saves a checkpoint after every step and at every epoch end (a checkpoint is the
same file whether or not the run goes on); each resume starts a fresh Lightning job from one of them and must train
on exactly the samples the baseline trained on after that moment.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import require
from tests.trainers import harness

EPOCHS = 2
STEPS = harness.STEPS_PER_EPOCH
#: name -> (checkpoint file under the baseline's run directory, optimizer steps done when it was taken)
MOMENTS = {
    'mid-epoch': ('steps/step=7.ckpt', 7),
    'last-step-of-epoch': (f'steps/step={STEPS}.ckpt', STEPS),
    'epoch-end': ('epochs/epoch=0.ckpt', STEPS),
    'later-epoch': (f'steps/step={STEPS + 7}.ckpt', STEPS + 7),
}


def _fit(config: dict) -> None:
    harness.run([sys.executable, '-m', 'tests.trainers.lightning_client', json.dumps(config)])


@pytest.fixture(scope='module', params=['ddp', 'ddp_spawn'])
def baseline(request, tmp_path_factory):
    """The strategy's uninterrupted 2-epoch run (checkpoints at every step and epoch end) and its sample log."""
    require('lightning')
    root = str(tmp_path_factory.mktemp(f'lightning-{request.param}'))
    os.environ['STREAMING_CORE_CACHE_DIR'] = os.path.join(root, 'cache')
    data = harness.make_dataset(root)
    config = dict(data=data, run=os.path.join(root, 'baseline'), strategy=request.param, devices=2, epochs=EPOCHS,
                  batch=harness.PER_DEVICE, workers=1, save=True)
    _fit(config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    assert sorted(log) == [0, 1] and all(len(batches) == EPOCHS * STEPS for batches in log.values())
    _assert_torchrun_order(config, log)
    return config, log


def _assert_torchrun_order(config: dict, log: dict) -> None:
    """Lightning sets no LOCAL_WORLD_SIZE, yet each rank gets the batches torchrun's 2 processes on one node get."""
    from streaming_core import StreamingDataset, World
    dataset = StreamingDataset(local=config['data'], split='train', batch_size=config['batch'], shuffle=True,
                               num_canonical_nodes=2)
    for epoch in range(EPOCHS):
        for rank, batches in log.items():
            world = World(rank=rank, world_size=2, local_world_size=2, workers_per_rank=config['workers'])
            plan = dataset.get_plan(world, epoch=epoch)[0, rank].transpose(1, 0, 2).reshape(-1, config['batch'])
            want = [[int(i) for i in row if i >= 0] for row in plan.tolist()]
            have = [b['ids'] for b in batches if b['epoch'] == epoch]
            assert have == want, f'Lightning {config["strategy"]} rank {rank} epoch {epoch}: not torchrun\'s order'


def _moments(strategy: str) -> list[str]:
    return list(MOMENTS) if strategy == 'ddp' else ['mid-epoch', 'epoch-end']


@pytest.mark.parametrize('moment', list(MOMENTS))
def test_resume_is_exact(baseline, moment, tmp_path):
    config, log = baseline
    if moment not in _moments(config['strategy']):
        pytest.skip(f'{config["strategy"]} is resumed at two moments only (time budget); ddp covers all four')
    ckpt, step = MOMENTS[moment]
    resumed = dict(config, run=str(tmp_path / 'resumed'), ckpt=os.path.join(config['run'], ckpt), save=False)
    _fit(resumed)
    harness.assert_exact_resume(log, harness.read_log(resumed['run']), step, EPOCHS,
                                f'Lightning {config["strategy"]} from {ckpt}')


def test_resume_on_one_process(baseline, tmp_path):
    """A checkpoint of 2 processes resumes on 1 (the same global batch): the rest of each epoch, exactly once."""
    config, log = baseline
    if config['strategy'] != 'ddp':
        pytest.skip('covered with ddp')
    ckpt, step = MOMENTS['mid-epoch']
    resumed = dict(config, run=str(tmp_path / 'resumed'), ckpt=os.path.join(config['run'], ckpt), save=False,
                   devices=1, strategy='auto', batch=2 * harness.PER_DEVICE)
    _fit(resumed)
    harness.assert_exact_resume(log, harness.read_log(resumed['run']), step, EPOCHS,
                                'Lightning 2 processes -> 1')
