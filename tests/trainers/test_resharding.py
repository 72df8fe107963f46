"""``refuse_foreign_sharding`` recognises accelerate's re-sharding wrappers on the call stack (real accelerate
classes, in one process: the wrapper is given 2 processes explicitly)."""

from __future__ import annotations

import pytest
from torch.utils.data import IterableDataset

from streaming_core.reading.resharding import ReshardingError, refuse_foreign_sharding
from tests.deps import require


class Guarded(IterableDataset):
    """A dataset that calls the guard where StreamingDataset is asked to: in set_epoch and __iter__."""

    def __init__(self) -> None:
        self.epochs: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        refuse_foreign_sharding(self)
        self.epochs.append(epoch)

    def __iter__(self):
        refuse_foreign_sharding(self)
        return iter(range(8))


def test_accelerate_iterable_shard_of_two_processes_is_refused():
    require('accelerate')
    from accelerate.data_loader import IterableDatasetShard
    shard = IterableDatasetShard(Guarded(), batch_size=2, num_processes=2, process_index=0)
    with pytest.raises(ReshardingError, match='StreamingTrainer') as refused:
        shard.set_epoch(1)
    assert 'IterableDatasetShard' in str(refused.value) and '1/2' in str(refused.value)
    with pytest.raises(ReshardingError):
        list(shard)


def test_one_process_and_direct_use_pass():
    require('accelerate')
    from accelerate.data_loader import IterableDatasetShard
    dataset = Guarded()
    single = IterableDatasetShard(dataset, batch_size=2, num_processes=1, process_index=0)
    single.set_epoch(3)
    assert list(single) == list(range(8))
    dataset.set_epoch(4)
    assert list(dataset) == list(range(8)) and dataset.epochs == [3, 4]


def test_accelerate_skip_first_batches_on_a_resumed_loader_fails_clearly(tmp_path):
    """accelerate's resume recipe calls skip_first_batches(loader, n); a StreamingDataLoader loaded from its state is
    already there, so the loader accelerate builds (a copy with our collate function) must fail saying so, not hand
    out (count, batch) tuples or skip the batches twice."""
    require('accelerate')
    from accelerate import skip_first_batches

    from streaming_core import StreamingDataLoader, StreamingDataset
    from tests.fixtures.data import ids_of, write_mds
    path = write_mds(str(tmp_path / 'ds'), 96)

    def make():
        return StreamingDataLoader(StreamingDataset(local=path, shuffle=True, batch_size=8, num_canonical_nodes=1),
                                   batch_size=8)

    full = ids_of(make())
    loader = make()
    it = iter(loader)
    head = ids_of([next(it) for _ in range(3)])
    state = loader.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    skipping = iter(skip_first_batches(resumed, 3))
    batch = next(skipping)
    for use in (lambda: batch['id'], lambda: len(batch), lambda: list(batch)):
        with pytest.raises(TypeError, match="StreamingDataLoader's batch in transit .* skip_first_batches"):
            use()
    with pytest.raises(AttributeError, match="StreamingDataLoader's batch in transit .* skip_first_batches"):
        batch.to('cpu')
    again = make()
    again.load_state_dict(state)
    assert head + ids_of(again) == full  # the loader itself resumes exactly


def test_a_missing_checkpoint_directory_is_named_as_missing_not_as_foreign(tmp_path):
    """A typo in resume_from_checkpoint (or a node without the checkpoints) said the checkpoint "was not written by
    StreamingTrainer"; it now says the directory does not exist."""
    from streaming_core.tools.integrations.huggingface import read_state
    with pytest.raises(FileNotFoundError, match='does not exist on this machine'):
        read_state(str(tmp_path / 'checkpoint-999'))
    (tmp_path / 'checkpoint-5').mkdir()
    with pytest.raises(FileNotFoundError, match='was not written by StreamingTrainer'):
        read_state(str(tmp_path / 'checkpoint-5'))
