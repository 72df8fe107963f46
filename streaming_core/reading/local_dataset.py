"""``LocalDataset``: a map-style dataset over a local directory (no downloads, no epochs)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import Dataset

from streaming_core.reading.catalogue import ShardCatalogue
from streaming_core.reading.numpy_indexing import getitem
from streaming_core.reading.shard_manager import ShardManager
from streaming_core.reading.stream import Stream

__all__ = ['LocalDataset']


class LocalDataset(Dataset):
    """Random access to the samples of a local dataset directory (with ``index.json``).

    Args:
        local: The dataset directory.
        split: An optional split subdirectory.
        allow_unsafe_types: Allow ``pkl`` columns.
        max_open_shards: Shards kept open per process.
    """

    def __init__(self, local: str, split: str | None = None, allow_unsafe_types: bool = False,
                 max_open_shards: int = 64) -> None:
        stream = Stream(local=local, split=split)
        stream.apply_default({})
        self.local = local
        self.split = split
        self.catalogue = ShardCatalogue([stream], [stream.shard_table(allow_unsafe_types)])
        self.shards = self.catalogue.readers
        self.samples_per_shard = self.catalogue.samples_per_shard
        self.num_samples = self.catalogue.num_samples
        self._manager = ShardManager(self.catalogue, None, max_open=max_open_shards)

    @property
    def size(self) -> int:
        """The number of samples."""
        return self.num_samples

    def __len__(self) -> int:
        return self.num_samples

    def get_item(self, sample_id: int) -> Any:
        """The sample with this id."""
        if not 0 <= sample_id < self.num_samples:
            raise IndexError(f'Invalid sample index {sample_id}: the dataset has {self.num_samples} samples.')
        return self._manager.sample(*self.catalogue.locate(sample_id))

    def __getitem__(self, at: Any) -> Any:
        """NumPy-style indexing: int (negative from the end), slice, list or array."""
        return getitem(at, self.num_samples, self.get_item, self.__getitem__)
