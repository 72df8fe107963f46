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

from tests.deps import require
from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes


EPOCHS = 2
STEPS = harness.STEPS_PER_EPOCH
#: name -> (checkpoint file under the baseline's run directory, optimizer steps done when it was taken)
MOMENTS = {
    'mid-epoch': ('steps/step=5.ckpt', 5),
    'last-step-of-epoch': (f'steps/step={STEPS}.ckpt', STEPS),
    'epoch-end': ('epochs/epoch=0.ckpt', STEPS),
    'later-epoch': (f'steps/step={STEPS + 5}.ckpt', STEPS + 5),
}


def _fit(config: dict) -> None:
    harness.run([sys.executable, '-m', 'tests.trainers.lightning_client', json.dumps(config)])


def _baseline(strategy: str, root: str) -> tuple[dict, dict]:
    """The strategy's uninterrupted 2-epoch run (checkpoints every 5 steps and at epoch ends) and its sample log."""
    config = dict(data=harness.make_dataset(root), run=os.path.join(root, 'baseline'), strategy=strategy, devices=2,
                  epochs=EPOCHS, batch=harness.PER_DEVICE, workers=1, save=True, persistent=strategy == 'ddp_spawn',
                  val=strategy != 'ddp_spawn')
    _fit(config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    assert sorted(log) == [0, 1] and all(len(batches) == EPOCHS * STEPS for batches in log.values())
    _assert_torchrun_order(config, log)
    return config, log


@pytest.fixture(scope='module')
def baselines(tmp_path_factory):
    """``baselines(strategy)``: that strategy's baseline, run once per module."""
    require('lightning')
    done: dict[str, tuple[dict, dict]] = {}

    def get(strategy: str) -> tuple[dict, dict]:
        if strategy not in done:
            done[strategy] = _baseline(strategy, str(tmp_path_factory.mktemp(f'lightning-{strategy}')))
        return done[strategy]
    return get


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


#: For the time budget (each resume starts a 2-process Lightning job): ddp at the moments only Lightning decides
#: (mid-epoch, its last step, its epoch-end checkpoint, each with a validation loop) and on one process, with
#: DataLoader workers started per epoch; ddp_spawn (3 processes to start per run) at its epoch-end checkpoint, with
#: persistent workers and no validation loop (each worker it spawns imports the client, and with it Lightning,
#: again: about 5 s of CPU each). A later epoch is covered by the torch loop and Hugging Face tests; spawned ranks
#: with workers started per epoch by tests/test_rank_state.py.
CASES = ([('ddp', moment) for moment in ('mid-epoch', 'last-step-of-epoch', 'epoch-end')] + [('ddp', 'one-process')]
         + [('ddp_spawn', 'epoch-end')])


@pytest.mark.parametrize('strategy, moment', CASES)
def test_resume_is_exact(baselines, strategy, moment, tmp_path):
    """A fresh job resumed from the checkpoint trains on exactly what the baseline trained after that moment; on one
    process (the same global batch), on exactly the rest of each epoch."""
    config, log = baselines(strategy)
    changes = {}
    if moment == 'one-process':
        changes = dict(devices=1, strategy='auto', batch=2 * harness.PER_DEVICE)
        moment = 'mid-epoch'
    ckpt, step = MOMENTS[moment]
    resumed = dict(config, run=str(tmp_path / 'resumed'), ckpt=os.path.join(config['run'], ckpt), save=False,
                   **changes)
    _fit(resumed)
    harness.assert_exact_resume(log, harness.read_log(resumed['run']), step, EPOCHS,
                                f'Lightning {resumed["strategy"]} ({resumed["devices"]} processes) from {ckpt}')
