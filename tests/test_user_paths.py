"""The user's own paths that once gave wrong samples silently: overridden methods, transforms, shared Stream
objects, loader batch sizes, collate functions that keep lists, set_epoch and states saved at an epoch's end."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from torch.utils.data import DataLoader

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from tests.fixtures.data import ids_of, write_mds
from tests.multiproc import ROOT


class Doubled(StreamingDataset):
    """The reference's pattern for transforms: override ``get_item``."""

    def get_item(self, sample_id: int, retry: int = 7):
        sample = super().get_item(sample_id)
        return {'id': sample['id'] * 2}


def add_one(sample):
    """A picklable transform (spawned workers import it)."""
    return {'id': sample['id'] + 1, 'data': sample['data']}


@pytest.mark.parametrize('on_bad_sample', ['raise', 'replace'])
@pytest.mark.parametrize('workers', [0, 2])
def test_an_overridden_get_item_sees_every_iterated_sample(tmp_path, on_bad_sample, workers):
    path = write_mds(str(tmp_path / 'ds'), 300, size_limit=1 << 16)  # long same-shard stretches: the fastest loop
    dataset = Doubled(local=path, batch_size=10, on_bad_sample=on_bad_sample)
    assert dataset[3] == {'id': 6} and dataset.get_item(3) == {'id': 6}
    loader = DataLoader(dataset, batch_size=10, num_workers=workers)
    assert sorted(ids_of(loader)) == [2 * i for i in range(300)]


def test_an_instance_level_override_is_honoured_too(tmp_path):
    path = write_mds(str(tmp_path / 'ds'), 50)
    dataset = StreamingDataset(local=path, batch_size=5)
    plain = dataset.get_item
    dataset.get_item = lambda i, retry=7: {'id': -plain(i)['id']}
    assert sorted(ids_of(dataset)) == sorted(-i for i in range(50))


@pytest.mark.parametrize('context', ['fork', 'spawn'])
def test_the_transform_applies_on_every_path(tmp_path, context):
    path = write_mds(str(tmp_path / 'ds'), 120, size_limit=1 << 16)
    dataset = StreamingDataset(local=path, batch_size=8, shuffle=True, transform=add_one)
    expected = list(range(1, 121))
    assert dataset[0]['id'] == 1 and [s['id'] for s in dataset[2:4]] == [3, 4]
    assert sorted(ids_of(dataset)) == expected
    loader = StreamingDataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context=context)
    assert sorted(ids_of(loader)) == expected
    replacing = StreamingDataset(local=path, batch_size=8, transform=add_one, on_bad_sample='replace')
    assert sorted(ids_of(replacing)) == expected
    with pytest.raises(TypeError, match='transform'):
        StreamingDataset(local=path, transform='resize')


class OwnTransform(StreamingDataset):
    """The reference's documented subclass (its StreamingVisionDataset's shape): keeps its own ``self.transform``
    and applies it in ``__getitem__``."""

    def __init__(self, *, local, transform, **kwargs):
        super().__init__(local=local, **kwargs)
        self.transform = transform

    def __getitem__(self, idx):
        return self.transform(super().__getitem__(idx))


class TransformFirst(StreamingDataset):
    """Sets ``self.transform`` before the base constructor, which must leave it alone."""

    def __init__(self, *, local, transform, **kwargs):
        self.transform = transform
        super().__init__(local=local, **kwargs)

    def __getitem__(self, idx):
        return self.transform(super().__getitem__(idx))


@pytest.mark.parametrize('cls', [OwnTransform, TransformFirst])
def test_a_subclass_own_transform_is_applied_once(tmp_path, cls):
    """The base class used to apply ``self.transform`` too: every value transformed twice, with no error."""
    path = write_mds(str(tmp_path / 'ds'), 60, size_limit=1 << 16)
    dataset = cls(local=path, transform=add_one, batch_size=6, shuffle=True)
    expected = list(range(1, 61))
    assert dataset.transform is add_one
    assert dataset[0]['id'] == 1
    assert sorted(ids_of(dataset)) == expected
    assert sorted(ids_of(StreamingDataLoader(dataset, batch_size=6, num_workers=2))) == expected


def add_ten(sample):
    return {'id': sample['id'] + 10, 'data': sample['data']}


def test_assigning_the_transform_of_a_dataset_replaces_it(tmp_path):
    """The train/eval switch: ``dataset.transform = other`` on a StreamingDataset takes effect on every path."""
    path = write_mds(str(tmp_path / 'ds'), 30, size_limit=1 << 16)
    dataset = StreamingDataset(local=path, batch_size=5, transform=add_one)
    assert dataset.transform is add_one and dataset[0]['id'] == 1
    dataset.transform = add_ten
    assert dataset.transform is add_ten and dataset[0]['id'] == 10
    assert sorted(ids_of(dataset)) == list(range(10, 40))
    assert sorted(ids_of(StreamingDataLoader(dataset, batch_size=5, num_workers=2))) == list(range(10, 40))
    plain = StreamingDataset(local=path, batch_size=5)
    assert plain.transform is None
    plain.transform = add_one
    assert plain[0]['id'] == 1 and sorted(ids_of(plain)) == list(range(1, 31))


def test_stream_objects_are_inputs_never_changed(tmp_path):
    a = write_mds(str(tmp_path / 'a'), 40)
    b = write_mds(str(tmp_path / 'b'), 60, start=1000)
    streams = [Stream(local=a, proportion=0.5), Stream(local=b, proportion=0.5)]
    before = [dict(vars(s)) for s in streams]
    train = StreamingDataset(streams=streams, batch_size=4, epoch_size=80)
    val = StreamingDataset(streams=streams, batch_size=4, epoch_size=50)  # failed: "at most one of proportion..."
    assert [dict(vars(s)) for s in streams] == before
    assert train.epoch_size == 80 and val.epoch_size == 50
    assert len(ids_of(val)) == 50


def _fresh_process(code: str) -> dict:
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


_RUN = '''
import json, sys
from streaming_core import StreamingDataLoader, StreamingDataset
path, ds_batch, loader_batch, workers, stop, state = {args}
dataset = StreamingDataset(local=path, shuffle=True, batch_size=ds_batch, num_canonical_nodes=1)
loader = StreamingDataLoader(dataset, batch_size=loader_batch, num_workers=workers)
if state is not None:
    loader.load_state_dict(state)
seen = []
try:
    for step, batch in enumerate(loader):
        seen.extend(int(i) for i in batch['id'])
        if stop is not None and step + 1 == stop:
            break
    print(json.dumps({{'seen': seen, 'state': loader.state_dict()}}))
except ValueError as err:
    print(json.dumps({{'error': str(err)}}))
'''


def _run(path, ds_batch, loader_batch, workers, stop=None, state=None) -> dict:
    return _fresh_process(_RUN.format(args=repr((path, ds_batch, loader_batch, workers, stop, state))))


@pytest.mark.parametrize('ds_batch', [None, 64])
def test_a_resume_with_workers_is_exact_when_the_dataset_adopts_the_loader_batch(tmp_path, ds_batch):
    """Issue 13, item 0: 5,000 samples, a loader batch of 64 and 2 workers, stopped after 5 batches."""
    path = write_mds(str(tmp_path / 'ds'), 5000, size_limit=1 << 15)
    full = _run(path, ds_batch, 64, 2)['seen']
    first = _run(path, ds_batch, 64, 2, stop=5)
    rest = _run(path, ds_batch, 64, 2, state=first['state'])
    assert first['seen'] + rest['seen'] == full


def test_a_batch_size_mismatch_with_workers_is_refused_before_the_first_sample(tmp_path):
    path = write_mds(str(tmp_path / 'ds'), 500)
    out = _run(path, 64, 10, 2)
    assert 'batch_size=10' in out['error'] and 'batch_size=64' in out['error']
    assert len(_run(path, 64, 10, 0)['seen']) == 500  # without workers the count is exact anyway


def keep_list(samples):
    """The COCO docs' collate: keep the samples as a list of tuples."""
    return [(s['id'], s['data']) for s in samples]


def test_a_collate_that_keeps_a_list_of_tuples_resumes_exactly(tmp_path):
    path = write_mds(str(tmp_path / 'ds'), 30)
    dataset = StreamingDataset(local=path, batch_size=16)
    loader = StreamingDataLoader(dataset, batch_size=16, collate_fn=keep_list)
    it = iter(loader)
    first = [i for i, _ in next(it)]
    state = loader.state_dict()
    assert state['sample_in_epoch'] == 16  # was 2: the first tuple's length
    resumed = StreamingDataLoader(StreamingDataset(local=path, batch_size=16), batch_size=16, collate_fn=keep_list)
    resumed.load_state_dict(state)
    rest = [i for batch in resumed for i, _ in batch]
    assert sorted(first + rest) == list(range(30))


@pytest.mark.parametrize('workers', [0, 2])
def test_a_state_saved_after_the_last_batch_resumes_at_the_next_epoch(tmp_path, workers):
    path = write_mds(str(tmp_path / 'ds'), 96)

    def make():
        dataset = StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1)
        return StreamingDataLoader(dataset, batch_size=8, num_workers=workers)

    reference = make()
    epochs = [ids_of(reference) for _ in range(2)]
    loader = make()
    assert ids_of(loader) == epochs[0]
    state = loader.state_dict()
    assert (state['epoch'], state['sample_in_epoch']) == (1, 0)
    resumed = make()
    resumed.load_state_dict(state)
    assert ids_of(resumed) == epochs[1]
    # The reference's form of the same moment (sample_in_epoch covering the epoch) means the same.
    covering = make()
    covering.load_state_dict(dict(state, epoch=0, sample_in_epoch=96))
    assert ids_of(covering) == epochs[1]


def test_set_epoch_is_the_trainers_epoch_and_agrees_with_a_loaded_state(tmp_path, caplog):
    path = write_mds(str(tmp_path / 'ds'), 64)

    def make():
        return StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1)

    reference = make()
    epochs = [ids_of(reference) for _ in range(3)]
    fresh = make()
    fresh.set_epoch(2)  # a new process resuming in epoch 2 (the Hugging Face Trainer, many loops)
    assert ids_of(fresh) == epochs[2]
    assert ids_of(fresh) == ids_of(_advanced(make(), 3))
    # After load_state_dict: the same epoch keeps the position; another epoch drops it, with a log line.
    source = make()
    source.set_epoch(1)
    it = iter(source)
    head = [next(it)['id'] for _ in range(24)]
    state = source.state_dict(24, True)
    assert state['epoch'] == 1
    same = make()
    same.load_state_dict(state)
    same.set_epoch(1)
    assert head + ids_of(same) == epochs[1]
    other = make()
    other.load_state_dict(state)
    with caplog.at_level('WARNING', logger='streaming_core.reading.dataset'):
        other.set_epoch(2)
    assert 'drops the loaded position' in caplog.text
    assert ids_of(other) == epochs[2]
    with pytest.raises(ValueError, match='set_epoch'):
        other.set_epoch(-1)


def test_set_epoch_after_workers_read_the_loaded_position_logs_no_drop(tmp_path, caplog):
    """With DataLoader workers, the workers start from the loaded position: after they read the resumed epoch, the
    trainer's set_epoch for the next one drops nothing and must not say it does."""
    make = _loaders(write_mds(str(tmp_path / 'ds'), 96), StreamingDataLoader, num_workers=2)
    reference = make()
    epochs = [ids_of(reference) for _ in range(2)]
    loader = make()
    it = iter(loader)
    head = [int(i) for _ in range(3) for i in next(it)['id']]
    state = loader.state_dict()
    del it
    resumed = make()
    resumed.load_state_dict(state)
    assert head + ids_of(resumed) == epochs[0]
    with caplog.at_level('WARNING', logger='streaming_core.reading.dataset'):
        resumed.set_epoch(1)
    assert 'drops the loaded position' not in caplog.text
    assert ids_of(resumed) == epochs[1]
    # A position nobody started from is still dropped, and said so.
    unread = make()
    unread.load_state_dict(state)
    with caplog.at_level('WARNING', logger='streaming_core.reading.dataset'):
        unread.set_epoch(1)
    assert 'drops the loaded position' in caplog.text
    assert ids_of(unread) == epochs[1]


def _loaders(path, loader, **kwargs):
    """A factory of fresh ``loader``s (batches of 8) over a new shuffled dataset of ``path`` (one canonical node)."""
    def make():
        return loader(StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1), batch_size=8,
                      **kwargs)
    return make


def _advanced(dataset, epochs):
    for _ in range(epochs):
        ids_of(dataset)
    return dataset


def test_a_torchdata_style_per_worker_state_resumes_each_worker(tmp_path):
    """The no-argument state_dict (the Stateful protocol) in a worker: its own position, exact with the same
    number of workers, refused clearly with another."""
    from torch.utils.data import get_worker_info  # noqa: F401  (the protocol is exercised in-process here)
    path = write_mds(str(tmp_path / 'ds'), 80)
    dataset = StreamingDataset(local=path, shuffle=True, batch_size=4, num_canonical_nodes=1)
    full = ids_of(StreamingDataset(local=path, shuffle=True, batch_size=4, num_canonical_nodes=1))
    it = iter(dataset)
    head = [next(it)['id'] for _ in range(13)]
    state = dataset.state_dict()
    assert state['worker_position']['samples'] == 13
    resumed = StreamingDataset(local=path, shuffle=True, batch_size=4, num_canonical_nodes=1)
    resumed.load_state_dict(json.loads(json.dumps(state)))
    assert head + ids_of(resumed) == full
    two_workers = StreamingDataset(local=path, shuffle=True, batch_size=4, num_canonical_nodes=1)
    two_workers.load_state_dict(dict(state, worker_position=dict(state['worker_position'], num_workers=2)))
    with pytest.raises(ValueError, match='num_workers=2'):
        iter(two_workers)


def test_a_state_from_another_version_of_the_dataset_is_refused(tmp_path):
    """A position names samples of one shard layout: resuming on a rewritten dataset is an error, never silent."""
    old = write_mds(str(tmp_path / 'old'), 50)
    new = write_mds(str(tmp_path / 'new'), 60)
    source = StreamingDataset(local=old, batch_size=5)
    it = iter(source)
    [next(it) for _ in range(10)]
    state = source.state_dict(10, True)
    target = StreamingDataset(local=new, batch_size=5)
    with pytest.raises(ValueError, match='another version of the dataset'):
        target.load_state_dict(state)
    twin = StreamingDataset(local=write_mds(str(tmp_path / 'twin'), 50), batch_size=5)  # same layout elsewhere
    twin.load_state_dict(state)
    assert len(ids_of(twin)) == 40


def test_a_state_of_another_dataset_of_the_same_shape_is_refused(tmp_path):
    """Another dataset with the same shard and sample counts (here: other hashes) is not the one a state names samples
    of; a copy of the same one elsewhere is, and a state saved before the content was recorded loads."""
    import shutil
    original = write_mds(str(tmp_path / 'a'), 50, hashes=['xxh64'])
    source = StreamingDataset(local=original, batch_size=5)
    it = iter(source)
    [next(it) for _ in range(10)]
    state = source.state_dict(10, True)
    assert state['dataset_content'] == source.content_version
    other = StreamingDataset(local=write_mds(str(tmp_path / 'b'), 50, start=5000, hashes=['xxh64']), batch_size=5)
    assert other.layout_identity == source.layout_identity  # the same shape: only the content tells them apart
    with pytest.raises(ValueError, match='saved for another dataset'):
        other.load_state_dict(state)
    copy = StreamingDataset(local=shutil.copytree(original, str(tmp_path / 'copy')), batch_size=5)
    copy.load_state_dict(state)  # the same dataset under another path (another machine)
    assert len(ids_of(copy)) == 40
    legacy = {k: v for k, v in state.items() if k != 'dataset_content'}  # saved before 0.2
    other.load_state_dict(legacy)


@pytest.mark.parametrize('samples', [100, 96])
def test_torchdata_without_workers_after_the_last_batch_of_an_epoch(tmp_path, samples):
    """torchdata's StatefulDataLoader without workers, saved after an epoch's last batch (before its loop ended).
    When that batch was short (100 samples in batches of 8), torchdata's saved fetcher has seen the end of the data and
    restores that, so the first iteration after loading is empty; the next reads epoch 1, then epoch 2: nothing is
    lost or repeated, but a loop that counts iterations as epochs counts one more (with DataLoader workers, or when
    the last batch was full, the first iteration reads epoch 1). What ``resumption.md`` says."""
    from tests.deps import require
    require('torchdata')
    from torchdata.stateful_dataloader import StatefulDataLoader
    make = _loaders(write_mds(str(tmp_path / 'ds'), samples), StatefulDataLoader, num_workers=0)
    reference = make()
    epochs = [ids_of(reference) for _ in range(3)]
    loader = make()
    it = iter(loader)
    for _ in range(-(-samples // 8)):
        next(it)
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    after = [ids_of(resumed) for _ in range(3 if samples % 8 else 2)]
    assert after == ([[]] if samples % 8 else []) + epochs[1:]
    if samples % 8:  # a loop that names its epochs: the empty iteration was its epoch 1; its epoch 2 reads epoch 1
        named = make()
        named.load_state_dict(state)
        got = []
        for epoch in (1, 2):
            named.dataset.set_epoch(epoch)
            got.append(ids_of(named))
        assert got == [[], epochs[1]]


def test_only_our_loader_carries_lightnings_epoch_and_position(tmp_path):
    """What lightning.md says of a plain DataLoader: Lightning calls set_epoch on the loader's sampler and saves the
    loader's state_dict(); a plain DataLoader of an iterable dataset has neither, ours has both."""
    path = write_mds(str(tmp_path / 'ds'), 32)
    dataset = StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1)
    plain = DataLoader(dataset, batch_size=8)
    assert not hasattr(plain.sampler, 'set_epoch') and not hasattr(plain, 'state_dict')
    ours = StreamingDataLoader(dataset, batch_size=8)
    epoch0 = ids_of(StreamingDataLoader(StreamingDataset(local=path, shuffle=True, batch_size=8,
                                                         num_canonical_nodes=1), batch_size=8))
    ours.sampler.set_epoch(0)
    assert ids_of(ours) == epoch0
    fresh = StreamingDataLoader(StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1),
                                batch_size=8)
    fresh.sampler.set_epoch(1)  # what Lightning does after an end-of-epoch checkpoint, in a new process
    assert ids_of(fresh) == ids_of(ours) != epoch0  # epoch 1's order
