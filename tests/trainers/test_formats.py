"""The new formats through the user's own path (issues 16 and 17): one dataset mixing an MDS stream with Parquet
files written by pyarrow, WebDataset tars written by ``webdataset.TarWriter`` and litdata chunks written by litdata
0.2.76, by proportions, trained by a plain loop under torchrun (gloo, 2 fresh rank processes, 2 DataLoader workers
each started by ``spawn``), with each stream downloaded from its directory into a local cache.

The uninterrupted run saves the loader's ``state_dict()`` at the last step of epoch 0 and in the middle of epoch 1;
fresh processes resume from each on another number of ranks (3 and 1, the same global batch) and must train on
exactly what the uninterrupted run trained on after that moment: per epoch, 0 samples lost and 0 repeated, and the
same global batch at every step.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest

from tests.deps import require
from tests.trainers import formats_data, harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes

CLIENT = 'tests.trainers.formats_client'
EPOCHS = 2
#: Per-device batch on 2 ranks: a global batch of 12, on 3 ranks 4 each, on 1 rank 12.
PER_DEVICE = 6
GLOBAL_BATCH = 2 * PER_DEVICE
EPOCH_SIZE = 480
STEPS = EPOCH_SIZE // GLOBAL_BATCH
#: The stream mix and the samples of each stream an epoch holds (proportion x epoch size): MDS and Parquet
#: sub-sampled, every WebDataset sample once, litdata's 40 samples up-sampled.
PROPORTIONS = {'mds': 0.3, 'parquet': 0.3, 'webdataset': 0.25, 'litdata': 0.15}
PER_EPOCH = {'mds': 144, 'parquet': 144, 'webdataset': 120, 'litdata': 72}
#: moment -> (optimizer steps done when the state was saved, ranks and DataLoader workers per rank of the resumed
#: run). 3 ranks read in the rank processes, for the time budget (9 processes importing torch on 2 cores); the
#: mid-epoch state resumes in 2 spawned workers. Our loader's state holds no per-worker part.
MOMENTS = {'last-step-of-epoch-0 on 3 ranks': (STEPS, 3, 0), 'mid-epoch-1 on 1 rank': (STEPS + STEPS // 2 - 3, 1, 2)}


def global_batches(log: dict[int, list[dict[str, Any]]]) -> dict[int, Counter[int]]:
    """``{step: multiset of the ids every rank trained on at that step}``."""
    out: dict[int, Counter[int]] = {}
    for batches in log.values():
        for batch in batches:
            out.setdefault(batch['step'], Counter()).update(batch['ids'])
    return out


def assert_epoch_mix(log: dict[int, list[dict[str, Any]]]) -> None:
    """Every epoch of the uninterrupted run holds each stream's share: every WebDataset sample once, no MDS or
    Parquet sample twice, each litdata sample once or twice; every step a full global batch."""
    for epoch in range(EPOCHS):
        ids = harness.epoch_ids(log, epoch)
        by_stream: dict[str, Counter[int]] = {name: Counter() for name in PER_EPOCH}
        for sample_id, count in ids.items():
            by_stream[formats_data.stream_of(sample_id)][sample_id] = count
        assert {name: sum(c.values()) for name, c in by_stream.items()} == PER_EPOCH, f'epoch {epoch}'
        assert sorted(by_stream['webdataset']) == formats_data.ids_of_stream('webdataset'), f'epoch {epoch}'
        assert max(by_stream['mds'].values()) == max(by_stream['parquet'].values()) == 1, f'epoch {epoch}'
        assert sorted(set(by_stream['litdata'].values())) == [1, 2], f'epoch {epoch}'
    steps = global_batches(log)
    assert sorted(steps) == list(range(EPOCHS * STEPS))
    assert all(sum(batch.values()) == GLOBAL_BATCH for batch in steps.values())


@pytest.fixture(scope='module')
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[int, list[dict[str, Any]]]]:
    """The uninterrupted 2-rank run under torchrun (states saved at the moments) and its sample log."""
    for module in ('pyarrow', 'webdataset', 'streaming_parquet', 'streaming_webdataset', 'streaming_litdata'):
        require(module)
    root = str(tmp_path_factory.mktemp('formats'))
    config = dict(data=formats_data.write_all(os.path.join(root, 'data')), proportions=PROPORTIONS,
                  epoch_size=EPOCH_SIZE, cache=os.path.join(root, 'cache'), run=os.path.join(root, 'baseline'),
                  workers=2, batch=PER_DEVICE, epochs=EPOCHS, steps_per_epoch=STEPS,
                  save=[step for step, _, _ in MOMENTS.values()])
    harness.torchrun(CLIENT, config, nproc=2)
    log = harness.read_log(config['run'])
    assert sorted(log) == [0, 1]
    assert_epoch_mix(log)
    return config, log


@pytest.mark.parametrize('moment', MOMENTS)
def test_mixed_formats_resume_exactly_on_another_number_of_ranks(baseline, moment: str, tmp_path) -> None:
    """Fresh processes on another number of ranks, resumed from the state saved at ``moment``, train on exactly the
    samples the uninterrupted run trained on after it, in the same global batches."""
    config, log = baseline
    step, ranks, workers = MOMENTS[moment]
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=[], resume=f'step-{step}',
                   run_of_resume=config['run'], batch=GLOBAL_BATCH // ranks, workers=workers)
    if ranks == 3:  # as on another machine: an empty cache, every derived index built again
        resumed['cache'] = str(tmp_path / 'cache')
    harness.launch(CLIENT, resumed, nproc=ranks)
    got = harness.read_log(resumed['run'])
    assert sorted(got) == list(range(ranks))
    harness.assert_exact_resume(log, got, step, EPOCHS, f'mixed formats, 2 ranks -> {ranks}')
    want = {s: batch for s, batch in global_batches(log).items() if s >= step}
    assert global_batches(got) == want, f'{moment}: the global batches differ from the uninterrupted run\'s'
