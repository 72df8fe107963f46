"""Training on a compressed dataset read in place (``local=`` a directory of ``.mds.zstd`` shards, no remote), through
the plain torchrun loop with our StreamingDataLoader and 2 workers: the decompressed copies sit beside the compressed
shards, and a resume in fresh processes trains on exactly what the uninterrupted run had left, both with the cache root
that made the copies and with another one (another user or node: the copies are compared, kept, not made again)."""

from __future__ import annotations

import os

import pytest

from tests.fixtures.data import write_mds
from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes

EPOCHS = 2
STEPS = harness.STEPS_PER_EPOCH
CLIENT = 'tests.trainers.torch_client'


def _copies(train: str) -> dict[str, tuple[int, int]]:
    """The decompressed copies beside the compressed shards: name -> (inode, mtime_ns)."""
    out = {}
    for name in sorted(os.listdir(train)):
        if name.endswith('.mds') and os.path.exists(os.path.join(train, name + '.zstd')):
            st = os.stat(os.path.join(train, name))
            out[name] = (st.st_ino, st.st_mtime_ns)
    return out


@pytest.fixture(scope='module')
def baseline(tmp_path_factory):
    """The uninterrupted run (cache root ``cache-a``) over a zstd MDS dataset read in place, and its sample log."""
    root = tmp_path_factory.mktemp('compressed-in-place')
    data = os.path.join(root, 'data')
    write_mds(os.path.join(data, 'train'), harness.SAMPLES, size_limit=1 << 11, compression='zstd')
    train = os.path.join(data, 'train')
    shards = [name for name in os.listdir(train) if name.endswith('.mds.zstd')]
    assert len(shards) > 8 and not _copies(train)
    config = dict(data=data, run=os.path.join(root, 'baseline'), loader='streaming', workers=2,
                  batch=harness.PER_DEVICE, epochs=EPOCHS, steps_per_epoch=STEPS, tuples=True, save=True)
    mp = pytest.MonkeyPatch()
    mp.setenv('STREAMING_CORE_CACHE_DIR', os.path.join(root, 'cache-a'))
    try:
        harness.torchrun(CLIENT, config)
    finally:
        mp.undo()
    log = harness.read_log(config['run'])
    harness.assert_full_epochs(log, EPOCHS)
    copies = _copies(train)
    assert sorted(copies) == sorted(name[:-len('.zstd')] for name in shards)  # every shard decompressed beside it
    return root, config, log, copies


@pytest.mark.parametrize('moment, cache', [('step-7', 'cache-a'), ('epochend-0', 'cache-b')])
def test_resume_on_compressed_data_in_place_is_exact(baseline, moment, cache, tmp_path, monkeypatch):
    root, config, log, copies = baseline
    monkeypatch.setenv('STREAMING_CORE_CACHE_DIR', os.path.join(root, cache))
    resumed = dict(config, run=str(tmp_path / 'resumed'), save=False, resume=moment, run_of_resume=config['run'])
    harness.launch(CLIENT, resumed)
    step = 7 if moment == 'step-7' else STEPS
    harness.assert_exact_resume(log, harness.read_log(resumed['run']), step, EPOCHS, f'zstd in place from {moment}')
    # The copies the baseline made are the ones read: compared (another cache root has no record of them), kept.
    assert _copies(os.path.join(config['data'], 'train')) == copies
