"""The Hugging Face Trainer with ``StreamingTrainer`` (torchrun, 2 CPU processes, gloo): every sample once per epoch,
evaluation of every sample once, and exact resumption from its checkpoints.

The run accumulates gradients over 2 batches (10 optimizer steps per epoch) and stops at ``max_steps=15``, in the
middle of epoch 1. Checkpoints: after every optimizer step (the one after step 10 is also what ``save_strategy='epoch'``
writes: the same loader state, taken after the epoch's last batch).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter

import pytest

from tests.deps import require
from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes


ACCUMULATE = 2
STEPS = harness.STEPS_PER_EPOCH // ACCUMULATE  # optimizer steps per epoch
MAX_STEPS = STEPS + STEPS // 2
MOMENTS = {'mid-epoch': 3, 'last-step-of-epoch': STEPS, 'later-epoch': STEPS + 3}


@pytest.fixture(scope='module')
def baseline(tmp_path_factory):
    """The uninterrupted run (a checkpoint after every step) and its sample log."""
    require('transformers')
    require('accelerate')
    root = str(tmp_path_factory.mktemp('huggingface'))
    config = dict(data=harness.make_dataset(root), run=os.path.join(root, 'baseline'), batch=harness.PER_DEVICE,
                  accumulate=ACCUMULATE, max_steps=MAX_STEPS, steps_per_epoch=STEPS, workers=1, save=True,
                  trainer='streaming')
    harness.torchrun('tests.trainers.hf_client', config)
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, 1)
    later = harness.epoch_ids(log, 1)
    assert sum(later.values()) == (MAX_STEPS - STEPS) * ACCUMULATE * 2 * harness.PER_DEVICE and max(later.values()) == 1
    return config, log


def _resume(config, tmp_path, step, **changes):
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=False,
                   ckpt=os.path.join(config['run'], 'out', f'checkpoint-{step}'), **changes)
    nproc = changes.pop('nproc', 2)
    resumed.pop('nproc', None)
    harness.torchrun('tests.trainers.hf_client', resumed, nproc=nproc)
    return harness.read_log(resumed['run'])


def test_every_sample_once_per_epoch_and_in_evaluation(baseline):
    config, _ = baseline
    expected = list(range(harness.SAMPLES, harness.SAMPLES + harness.VAL_SAMPLES))
    for step in (STEPS, MAX_STEPS):
        with open(os.path.join(config['run'], f'eval-{step}.json')) as handle:
            ids = json.load(handle)
        assert sorted(ids) == expected, f'evaluation at step {step}: {len(ids)} ids, {len(set(ids))} distinct'


@pytest.mark.parametrize('moment', list(MOMENTS))
def test_resume_is_exact(baseline, moment, tmp_path):
    config, log = baseline
    step = MOMENTS[moment]
    harness.assert_exact_resume(log, _resume(config, tmp_path, step), step, 2,
                                f'StreamingTrainer from checkpoint-{step}')


def test_resume_on_one_process(baseline, tmp_path):
    """A checkpoint of 2 processes resumes on 1 with the same global batch: the rest of each epoch, exactly once."""
    config, log = baseline
    step = MOMENTS['mid-epoch']
    resumed = _resume(config, tmp_path, step, batch=2 * harness.PER_DEVICE, nproc=1)
    harness.assert_exact_resume(log, resumed, step, 2, 'StreamingTrainer 2 processes -> 1')


def test_plain_trainer_refuses_a_streaming_dataset(baseline, tmp_path):
    """transformers.Trainer would let accelerate shard the dataset again (each rank trains on a quarter): it must
    stop before training, saying what to use."""
    config, _ = baseline
    plain = dict(config, run=str(tmp_path / 'plain'), save=False, trainer='plain', max_steps=2)
    with pytest.raises(AssertionError) as failed:
        harness.torchrun('tests.trainers.hf_client', plain)
    assert 'StreamingTrainer' in str(failed.value), str(failed.value)[-3000:]
    trained = harness.read_log(plain['run']) if os.path.exists(plain['run']) and any(
        n.startswith('log-rank') for n in os.listdir(plain['run'])) else {}
    assert not trained, f'the plain Trainer trained on {sum(len(b) for b in trained.values())} batches first'


def test_checkpoint_without_streaming_state_is_refused(baseline, tmp_path):
    """A checkpoint that does not say which samples were consumed is an error naming the file, never a silent
    restart of the epoch."""
    config, _ = baseline
    source = os.path.join(config['run'], 'out', 'checkpoint-2')
    copy = tmp_path / 'checkpoint-2'
    subprocess.run(['cp', '-r', source, str(copy)], check=True)
    os.remove(copy / 'streaming_state.json')
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=False, ckpt=str(copy))
    with pytest.raises(AssertionError, match='streaming_state.json is missing'):
        harness.torchrun('tests.trainers.hf_client', resumed)


def test_no_thread_of_gloo_is_left_at_exit(baseline):
    """The end of ``docs/guide/huggingface.md`` (free the trainer, collect, destroy the group) stops gloo's threads
    before the interpreter shuts down, where one of them can abort the process (pytorch/pytorch#190489)."""
    config, _ = baseline
    for rank in range(2):
        with open(os.path.join(config['run'], f'threads-rank{rank}.json')) as handle:
            threads = json.load(handle)
        assert threads['end'] <= threads['start'], f'rank {rank}: threads at the start and after teardown: {threads}'


def test_counts(baseline):
    """The log itself: every batch has the per-device size and every rank took the same steps."""
    _, log = baseline
    sizes = Counter(len(b['ids']) for batches in log.values() for b in batches)
    assert sizes == Counter({harness.PER_DEVICE: 2 * MAX_STEPS * ACCUMULATE})


_DROP_LAST = '''
import sys, torch
from transformers import TrainingArguments
from streaming_core import StreamingDataset
from streaming_core.tools.integrations.huggingface import StreamingTrainer
data, out = sys.argv[1:3]
args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, dataloader_drop_last=True, report_to=[],
                         use_cpu=True)
trainer = StreamingTrainer(model=torch.nn.Linear(1, 1), args=args,
                           train_dataset=StreamingDataset(local=data, split='train'))
loader = trainer.get_train_dataloader()
print(loader.drop_last, loader.batch_size)
'''


def test_the_trainers_drop_last_reaches_the_streaming_loader(tmp_path):
    """``dataloader_drop_last=True`` drops the epoch's partial last batch, as the plain Trainer's loader does (it
    was ignored); the state after such an epoch is the next epoch's start (tests/test_dataloader.py)."""
    require('transformers')
    import sys
    done = subprocess.run([sys.executable, '-c', _DROP_LAST, harness.make_dataset(str(tmp_path)),
                           str(tmp_path / 'out')], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ['True', '4']
