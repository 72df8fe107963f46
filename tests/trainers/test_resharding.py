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
