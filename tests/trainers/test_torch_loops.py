"""Plain training loops on 2 processes: torchrun with our StreamingDataLoader (samples as tuples the collate_fn keeps
in a list) and torchdata's StatefulDataLoader with 0 and 2 workers, resumed from states saved by the loop.

The loop is the one users write (``tests/trainers/torch_client.py``): it saves the loader's ``state_dict()`` after
every step and after each epoch's loop, derives its epoch from the steps done and calls ``set_epoch`` each epoch.
"""

from __future__ import annotations

import os

import pytest

from conftest import require
from tests.trainers import harness

EPOCHS = 2
STEPS = harness.STEPS_PER_EPOCH
CLIENT = 'tests.trainers.torch_client'
#: name -> (state name, steps done when it was saved)
MOMENTS = {'mid-epoch': ('step-7', 7), 'last-step-of-epoch': (f'step-{STEPS}', STEPS),
           'epoch-end': ('epochend-0', STEPS), 'later-epoch': (f'step-{STEPS + 7}', STEPS + 7)}
#: client -> the moments it is resumed at (torchdata without workers: two, for the time budget)
CLIENTS = {'streaming-2-workers': list(MOMENTS), 'stateful-2-workers': list(MOMENTS),
           'stateful-0-workers': ['mid-epoch', 'epoch-end']}


@pytest.fixture(scope='module', params=list(CLIENTS))
def baseline(request, tmp_path_factory):
    """The client's uninterrupted run (torchrun, states saved at every step and epoch end) and its sample log."""
    loader, workers, _ = request.param.split('-')
    if loader == 'stateful':
        require('torchdata')
    root = str(tmp_path_factory.mktemp(request.param))
    os.environ['STREAMING_CORE_CACHE_DIR'] = os.path.join(root, 'cache')
    config = dict(data=harness.make_dataset(root), run=os.path.join(root, 'baseline'), loader=loader,
                  workers=int(workers), batch=harness.PER_DEVICE, epochs=EPOCHS, steps_per_epoch=STEPS,
                  tuples=loader == 'streaming', save=True)
    harness.torchrun(CLIENT, config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    return request.param, config, log


def _resume(config, tmp_path, state, nproc=2, **changes):
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=False, resume=state, run_of_resume=config['run'],
                   **changes)
    harness.launch(CLIENT, resumed, nproc=nproc)
    return harness.read_log(resumed['run'])


@pytest.mark.parametrize('moment', list(MOMENTS))
def test_resume_is_exact(baseline, moment, tmp_path):
    name, config, log = baseline
    if moment not in CLIENTS[name]:
        pytest.skip(f'{name} is resumed at {CLIENTS[name]} only (time budget)')
    state, step = MOMENTS[moment]
    harness.assert_exact_resume(log, _resume(config, tmp_path, state), step, EPOCHS, f'{name} from {state}')


def test_other_number_of_processes(baseline, tmp_path):
    """Our loader's state is global: 2 processes resume on 1 exactly (same global batch). torchdata's state is per
    worker of each rank: another number of processes is refused with an error that says what to do."""
    name, config, log = baseline
    state, step = MOMENTS['mid-epoch']
    if name == 'streaming-2-workers':
        resumed = _resume(config, tmp_path, state, nproc=1, batch=2 * harness.PER_DEVICE)
        harness.assert_exact_resume(log, resumed, step, EPOCHS, 'StreamingDataLoader 2 processes -> 1')
    elif name == 'stateful-2-workers':
        with pytest.raises(AssertionError, match='saved by 2 ranks; this run has 1'):
            _resume(config, tmp_path, state, nproc=1, batch=2 * harness.PER_DEVICE)
    else:
        pytest.skip('covered by the 2-worker clients')


def test_other_number_of_workers_is_refused(baseline, tmp_path):
    """torchdata's per-worker state with another num_workers: a clear error naming both worker counts."""
    name, config, _ = baseline
    if name != 'stateful-2-workers':
        pytest.skip('torchdata with 2 workers only')
    with pytest.raises(AssertionError, match='num_workers=2'):
        _resume(config, tmp_path, MOMENTS['mid-epoch'][0], workers=1)
