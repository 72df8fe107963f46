"""Plain training loops on 2 processes: torchrun with our StreamingDataLoader (samples as tuples the collate_fn keeps
in a list) and torchdata's StatefulDataLoader with 0 and 2 workers, resumed from states saved by the loop.

The loop is the one users write (``tests/trainers/torch_client.py``): it saves the loader's ``state_dict()`` after
every step and after each epoch's loop, derives its epoch from the steps done and calls ``set_epoch`` each epoch.
"""

from __future__ import annotations

import os

import pytest

from tests.deps import require
from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes


EPOCHS = 2
STEPS = harness.STEPS_PER_EPOCH
CLIENT = 'tests.trainers.torch_client'
#: name -> (state name, steps done when it was saved)
MOMENTS = {'mid-epoch': ('step-7', 7), 'second-last-step': (f'step-{STEPS - 1}', STEPS - 1),
           'last-step-of-epoch': (f'step-{STEPS}', STEPS),
           'epoch-end': ('epochend-0', STEPS), 'later-epoch': (f'step-{STEPS + 7}', STEPS + 7)}
#: (client, case): every moment with 2 workers, torchdata without workers at two (time budget), and another number
#: of processes / workers. The second-last step: one worker of each rank has read its share, the other has a batch
#: left (torchdata's per-worker states resumed the finished worker in the next epoch: its share was read twice).
CASES = ([('streaming-2-workers', m) for m in [*MOMENTS, 'one-process'] if m != 'second-last-step']
         + [('stateful-2-workers', m) for m in [*MOMENTS, 'one-process', 'one-worker']]
         + [('stateful-0-workers', 'mid-epoch'), ('stateful-0-workers', 'epoch-end')])


def _baseline(name: str, root: str) -> tuple[str, dict, dict]:
    """The client's uninterrupted run (torchrun, states saved at every step and epoch end) and its sample log."""
    loader, workers, _ = name.split('-')
    config = dict(data=harness.make_dataset(root), run=os.path.join(root, 'baseline'), loader=loader,
                  workers=int(workers), batch=harness.PER_DEVICE, epochs=EPOCHS, steps_per_epoch=STEPS,
                  tuples=loader == 'streaming', save=True)
    harness.torchrun(CLIENT, config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    return name, config, log


@pytest.fixture(scope='module')
def baselines(tmp_path_factory):
    """``baselines(client)``: that client's baseline, run once per module."""
    done: dict[str, tuple[str, dict, dict]] = {}

    def get(name: str) -> tuple[str, dict, dict]:
        if name.startswith('stateful'):
            require('torchdata')
        if name not in done:
            done[name] = _baseline(name, str(tmp_path_factory.mktemp(name)))
        return done[name]
    return get


def _resume(config, tmp_path, state, nproc=2, **changes):
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=False, resume=state, run_of_resume=config['run'],
                   **changes)
    harness.launch(CLIENT, resumed, nproc=nproc)
    return harness.read_log(resumed['run'])


@pytest.mark.parametrize('client, case', CASES)
def test_resume_is_exact(baselines, client, case, tmp_path):
    """Fresh processes resumed from a saved state train on exactly what the baseline trained after it. Our loader's
    state is global: 2 processes resume on 1 (same global batch). torchdata's is per worker of each rank: another
    number of processes or of workers is refused with an error that says what to do."""
    name, config, log = baselines(client)
    state, step = MOMENTS['mid-epoch' if case in ('one-process', 'one-worker') else case]
    if case == 'one-worker':
        with pytest.raises(AssertionError, match='num_workers=2'):
            _resume(config, tmp_path, state, workers=1)
    elif case == 'one-process' and name.startswith('stateful'):
        with pytest.raises(AssertionError, match='saved by 2 ranks; this run has 1'):
            _resume(config, tmp_path, state, nproc=1, batch=2 * harness.PER_DEVICE)
    elif case == 'one-process':
        resumed = _resume(config, tmp_path, state, nproc=1, batch=2 * harness.PER_DEVICE)
        harness.assert_exact_resume(log, resumed, step, EPOCHS, f'{name}: 2 processes -> 1')
    else:
        harness.assert_exact_resume(log, _resume(config, tmp_path, state), step, EPOCHS, f'{name} from {state}')
