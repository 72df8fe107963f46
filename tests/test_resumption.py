"""Mid-epoch resumption: state_dict / load_state_dict, in-process and through StreamingDataLoader."""

from __future__ import annotations

import pytest

from streaming_core import StreamingDataLoader, StreamingDataset
from tests.fixtures.data import ids_of


def _dataset(path, **kwargs):
    args = dict(local=path, batch_size=4, shuffle=True, num_canonical_nodes=2, shuffle_block_size=40)
    args.update(kwargs)
    return StreamingDataset(**args)


@pytest.mark.parametrize('stop', [0, 1, 37, 100, 199, 200])
def test_resume_at_any_sample_yields_exactly_the_rest(mds_dir, stop):
    path = mds_dir(200)
    full = ids_of(_dataset(path))
    dataset = _dataset(path)
    state = dataset.state_dict(stop, True)
    assert state['epoch'] == -1  # before the first iteration, like the reference
    seen = []
    for item in dataset:
        if len(seen) == stop:
            break
        seen.append(item['id'])
    state = dataset.state_dict(stop, True)
    # A state that covers the whole epoch is the start of the next one.
    position = (0, stop) if stop < len(full) else (1, 0)
    assert state == {'epoch': position[0], 'sample_in_epoch': position[1], 'num_canonical_nodes': 2,
                     'shuffle_seed': 9176, 'initial_physical_nodes': 1, 'dataset_layout': dataset.layout_identity,
                     'dataset_content': dataset.content_version, 'parallel_shape': [1, 1]}
    resumed = _dataset(path)
    resumed.load_state_dict(state)
    if stop == len(full):
        assert ids_of(resumed) == ids_of(_epoch(path, 1))
        return
    rest = ids_of(resumed)
    assert seen + rest == full
    # The epoch after the resumed one starts from the beginning of epoch 1.
    assert ids_of(resumed) == ids_of(_epoch(path, 1))


def _epoch(path, epoch):
    dataset = _dataset(path)
    for _ in range(epoch):
        ids_of(dataset)
    return dataset


def test_resume_adopts_seed_and_canonical_nodes(mds_dir):
    path = mds_dir(100)
    source = _dataset(path, shuffle_seed=7, num_canonical_nodes=4)
    it = iter(source)
    taken = [next(it)['id'] for _ in range(10)]
    state = source.state_dict(10, True)
    target = _dataset(path)  # different seed and NCN in the constructor: the checkpoint wins
    target.load_state_dict(state)
    assert taken + ids_of(target) == ids_of(_dataset(path, shuffle_seed=7, num_canonical_nodes=4))
    assert target.shuffle_seed == 7 and target.num_canonical_nodes == 4


def test_state_dict_counts_from_the_resume_point(mds_dir):
    path = mds_dir(100)
    dataset = _dataset(path)
    dataset.load_state_dict({'epoch': 0, 'sample_in_epoch': 30, 'num_canonical_nodes': 2, 'shuffle_seed': 9176})
    it = iter(dataset)
    for _ in range(10):
        next(it)
    assert dataset.state_dict(10, False)['sample_in_epoch'] == 40
    assert dataset.state_dict(10, True)['sample_in_epoch'] == 10


def test_load_state_dict_validates(mds_dir):
    dataset = _dataset(mds_dir(20))
    with pytest.raises(ValueError, match='missing keys'):
        dataset.load_state_dict({'epoch': 0})
    with pytest.raises(ValueError, match='must be an integer'):
        dataset.load_state_dict({'epoch': 0, 'sample_in_epoch': 'x', 'num_canonical_nodes': 1, 'shuffle_seed': 1})
    with pytest.raises(TypeError):
        dataset.load_state_dict([1, 2])


@pytest.mark.parametrize('workers', [0, 2])
def test_dataloader_resume_with_different_worker_count(mds_dir, workers):
    path = mds_dir(160)
    full = []
    for batch in StreamingDataLoader(_dataset(path), batch_size=4, num_workers=2):
        full.extend(batch['id'].tolist())
    loader = StreamingDataLoader(_dataset(path), batch_size=4, num_workers=2)
    seen = []
    for i, batch in enumerate(loader):
        seen.extend(batch['id'].tolist())
        if i == 9:
            break
    state = loader.state_dict()
    assert state['sample_in_epoch'] == 40
    resumed = StreamingDataLoader(_dataset(path), batch_size=4, num_workers=workers)
    resumed.load_state_dict(state)
    rest = [i for batch in resumed for i in batch['id'].tolist()]
    assert seen + rest == full


def test_reference_style_state_without_initial_nodes(mds_dir):
    path = mds_dir(60)
    dataset = _dataset(path)
    dataset.load_state_dict({'epoch': 0, 'sample_in_epoch': 20, 'num_canonical_nodes': 2, 'shuffle_seed': 9176})
    assert ids_of(dataset) == ids_of(_dataset(path))[20:]


def test_a_state_far_past_the_epoch_warns_a_padded_end_does_not(tmp_path):
    """A state saved for a bigger dataset (1100 samples into an epoch of 500) used to start the next epoch silently;
    the reference refuses it. It still ends the epoch (as a padded end-of-epoch state of the reference does, which
    passes the sample count by a little and must not warn), and says so."""
    import warnings

    from streaming_core import StreamingDataset
    from tests.fixtures.data import write_mds
    data = write_mds(str(tmp_path / 'ds'), 500, size_limit=1 << 12)
    base = {'num_canonical_nodes': 3, 'shuffle_seed': 9176, 'initial_physical_nodes': 1}
    # 501: the end of an epoch padded to 3 canonical nodes; 760: one padded by a big world (64 ranks x batch 12)
    for offset, warns in ((1100, True), (501, False), (760, False)):
        dataset = StreamingDataset(local=data, batch_size=4, shuffle=True, num_canonical_nodes=3)
        dataset.load_state_dict({'epoch': 0, 'sample_in_epoch': offset, **base})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            ids = [int(s['id']) for s in dataset]
        assert set(ids) == set(range(500))  # epoch 1, whole (padded to 3 canonical nodes with a repeat)
        said = [str(w.message) for w in caught if 'another dataset' in str(w.message)]
        assert bool(said) == warns, (offset, said)
