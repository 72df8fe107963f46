"""The shard catalogue: every shard of a dataset's streams, in stream order, and where each sample lives.

One object, built once per dataset, owns the streams -> shards -> samples table. The dataset, the map-style
``LocalDataset``, the shard manager and the epoch iterator all read it; nothing else rebuilds any part of it. The
tables are NumPy arrays (global shard ids are positions in stream order), so planning and lookups are vectorised.
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import EmptyDatasetError
from streaming_core.spanner import Spanner
from streaming_core.stream import Stream
from streaming_core.util import gc_paused

__all__ = ['ShardCatalogue']


def _offsets(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


class ShardCatalogue:
    """Every shard of ``streams`` (global shard ids in stream order) and the sample id -> ``(shard, row)`` map.

    Args:
        streams: The streams (with their defaults applied).
        readers: Per stream, one reader per shard (as :meth:`Stream.get_shards` returns them).

    Attributes:
        streams: The streams.
        readers: One reader per shard, flat, in global shard order.
        shards_per_stream, shard_offset_per_stream: Shards per stream and the first global shard id of each.
        stream_per_shard: The stream of each shard.
        shard_in_stream: Each shard's position within its stream.
        samples_per_shard, sample_offset_per_shard: Samples per shard and the first global sample id of each.
        samples_per_stream, sample_offset_per_stream: The same per stream.
        num_samples: All samples of all streams.
    """

    def __init__(self, streams: Sequence[Stream], readers: Sequence[Sequence[Any]]) -> None:
        if len(streams) != len(readers):
            raise ValueError(f'{len(streams)} streams but {len(readers)} reader lists.')
        self.streams = list(streams)
        self.readers: list[Any] = [reader for per in readers for reader in per]
        self.shards_per_stream = np.array([len(per) for per in readers], dtype=np.int64)
        self.shard_offset_per_stream = _offsets(self.shards_per_stream)
        self.stream_per_shard = np.repeat(np.arange(len(self.streams), dtype=np.int64), self.shards_per_stream)
        self.shard_in_stream = (np.arange(len(self.readers), dtype=np.int64)
                                - self.shard_offset_per_stream[self.stream_per_shard])
        self.samples_per_shard = np.array([reader.samples for reader in self.readers], dtype=np.int64)
        self.sample_offset_per_shard = _offsets(self.samples_per_shard)
        prefix = np.concatenate([[0], np.cumsum(self.samples_per_shard)]).astype(np.int64)
        self.samples_per_stream = (prefix[self.shard_offset_per_stream + self.shards_per_stream]
                                   - prefix[self.shard_offset_per_stream])
        self.sample_offset_per_stream = _offsets(self.samples_per_stream)
        self.num_samples = int(self.samples_per_shard.sum())
        self._spanner = Spanner(self.samples_per_shard)

    @classmethod
    def load(cls, streams: Sequence[Stream], allow_unsafe_types: bool = False) -> 'ShardCatalogue':
        """Bring every stream's index up to date and build the catalogue.

        Raises:
            EmptyDatasetError: a stream holds no samples (naming its index file).
        """
        readers = []
        for stream in streams:
            with gc_paused():  # thousands of small reader objects: collections would only walk them
                shards = stream.get_shards(allow_unsafe_types)
            if sum(reader.samples for reader in shards) == 0:
                raise EmptyDatasetError(f'Stream contains no samples: {stream.index_path()}.')
            readers.append(shards)
        return cls(streams, readers)

    # ----------------------------------------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        """The number of shards of all streams."""
        return len(self.readers)

    @property
    def spanner(self) -> Spanner:
        """The sample id -> ``(shard, row)`` map (the reference's ``Spanner`` interface)."""
        return self._spanner

    def locate(self, sample_id: int) -> tuple[int, int]:
        """``(global shard id, row within the shard)`` of one global sample id.

        Raises:
            IndexError: the id is out of range.
        """
        return self._spanner[sample_id]

    def locate_many(self, sample_ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Vectorised :meth:`locate` (ids must be in range): ``(shard ids, rows)``."""
        return self._spanner.locate(sample_ids)

    def stream_of(self, shard: int) -> Stream:
        """The stream a shard belongs to."""
        return self.streams[int(self.stream_per_shard[shard])]

    def layout_identity(self) -> str:
        """A digest of every stream's shards and their sample counts: what a position in the sample order depends
        on (the same on every machine, unlike the index files' stat identity)."""
        digest = hashlib.blake2b(digest_size=8)
        digest.update(self.shards_per_stream.tobytes())
        digest.update(self.samples_per_shard.tobytes())
        return digest.hexdigest()
