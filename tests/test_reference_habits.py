"""Habits of code written for mosaicml-streaming 0.13 that must keep their meaning (found by a review of the compat
facade; they live in the core): a subclass's ``self.length`` is what ``len()`` returns,
``state_dict(n, from_beginning=True)`` right after ``load_state_dict`` counts ``n`` from the start of the epoch, and
``Stream.split`` is a string (``''`` for none) that a subclass can join into a path."""

from __future__ import annotations

import os

from torch.utils.data import DataLoader

from streaming_core import Stream, StreamingDataset
from tests.fixtures.data import ids_of, write_mds


class Capped(StreamingDataset):
    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = length  # the reference's __len__ returns self.length


def test_a_subclass_length_is_what_len_returns(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 100)
    dataset = Capped(40, local=path, batch_size=10)
    assert dataset.length == 40 and len(dataset) == 40
    assert len(DataLoader(dataset, batch_size=10)) == 4
    plain = StreamingDataset(local=path, batch_size=10)
    assert plain.length == len(plain) == 100


def test_state_dict_from_the_beginning_right_after_a_load(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 100)

    def dataset():
        return StreamingDataset(local=path, batch_size=10, shuffle=True, shuffle_seed=11, num_canonical_nodes=1)
    full = ids_of(dataset())
    loaded = dataset()
    loaded.load_state_dict({'epoch': 0, 'sample_in_epoch': 30, 'num_canonical_nodes': 1, 'shuffle_seed': 11})
    # A trainer that checkpoints the epoch's own count (Composer passes sample_in_epoch with True) before a batch.
    assert loaded.state_dict(30, True)['sample_in_epoch'] == 30
    assert loaded.state_dict(0, False)['sample_in_epoch'] == 30  # counted from the resume point
    again = dataset()
    again.load_state_dict(loaded.state_dict(30, True))
    assert ids_of(again) == full[30:]


class PathStream(Stream):
    """A custom stream building a path as the reference's users do."""

    def get_shards(self, world, allow_unsafe_types):
        self.built_path = os.path.join(self.local, self.split, 'index.json')
        return super().get_shards(world, allow_unsafe_types)


def test_stream_split_is_a_string(tmp_path):
    path = write_mds(str(tmp_path / 'data'), 20)
    assert Stream(local=path).split == '' and Stream(local=path, split=None).split == ''
    dataset = StreamingDataset(streams=[PathStream(local=path)], batch_size=4)
    stream = dataset.streams[0]  # the dataset's own copy, with its defaults applied
    assert len(dataset) == 20
    assert stream.built_path == os.path.join(path, 'index.json') and os.path.isfile(stream.built_path)
    write_mds(str(tmp_path / 'splits' / 'train'), 12)
    by_default = StreamingDataset(streams=[PathStream(local=str(tmp_path / 'splits'))], split='train', batch_size=4)
    assert len(by_default) == 12  # the dataset's split
    stream = by_default.streams[0]
    assert stream.split == 'train' and os.path.isfile(stream.built_path)


def test_a_checkpoint_num_canonical_nodes_stays_for_later_epochs_with_any_workers(tmp_path):
    """A state saved with num_canonical_nodes=4, loaded into a dataset built without it: the resumed epoch and the
    next one follow 4 canonical nodes with 0 and with 2 workers (the reference's workers fall back to the
    constructor's value after the resumed epoch, its main process does not)."""
    from streaming_core import StreamingDataLoader
    path = write_mds(str(tmp_path / 'data'), 200)
    four = StreamingDataset(local=path, batch_size=10, shuffle=True, shuffle_seed=11, num_canonical_nodes=4)
    expected = [ids_of(four), ids_of(four)]
    for workers in (0, 2):
        loader = StreamingDataLoader(StreamingDataset(local=path, batch_size=10, shuffle=True, shuffle_seed=11),
                                     batch_size=10, num_workers=workers)
        loader.load_state_dict({'epoch': 0, 'sample_in_epoch': 50, 'num_canonical_nodes': 4, 'shuffle_seed': 11,
                                'initial_physical_nodes': 1})
        resumed = [int(i) for batch in loader for i in batch['id']]
        following = [int(i) for batch in loader for i in batch['id']]
        assert sorted(resumed) == sorted(expected[0][50:]), workers
        assert following == expected[1], workers
