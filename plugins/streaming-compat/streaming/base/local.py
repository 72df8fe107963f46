"""``streaming.base.local``: :class:`LocalDataset`, random access to a local dataset directory."""

from __future__ import annotations

from streaming.base.array import Array
from streaming_core.reading.local_dataset import LocalDataset as _CoreLocalDataset

__all__ = ['LocalDataset']


class LocalDataset(_CoreLocalDataset, Array):
    """streaming-core's :class:`~streaming_core.reading.local_dataset.LocalDataset`, also an
    :class:`~streaming.base.array.Array`.

    Args:
        local: The dataset directory (holding ``index.json``).
        split: An optional split subdirectory.
        allow_unsafe_types: Allow ``pkl`` columns (unpickling can run code).
    """

    def __init__(self, local: str, split: str | None = None, allow_unsafe_types: bool = False) -> None:
        super().__init__(local, split=split, allow_unsafe_types=allow_unsafe_types)
