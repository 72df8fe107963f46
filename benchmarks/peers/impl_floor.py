"""The floor: the same MDS shards read by a minimal Python loop (no library).

Per shard, once: ``mmap`` the file and read its offset table into a list. Per sample: one offset lookup, one
``unpack_from`` of the head (columns are in name order: ``data`` then ``id``; ``id`` then ``image``), slices of
the mapping (``bytes`` for the data column, a zero-copy ``np.frombuffer`` view for the image), one ``unpack_from``
for the id, and the same dict the libraries return. The shuffled order
is one global permutation; DataLoader workers take contiguous slices of the order. No shuffle algorithm, no
world, no locking, no prefetch: nothing but the reads, so a library cannot be expected to beat it.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = 'floor'
_HEAD = struct.Struct('<I').unpack_from
_ID = struct.Struct('<q').unpack_from


def _shards(path: str) -> tuple[list[str], list[int]]:
    with open(os.path.join(path, 'index.json')) as handle:
        shards = json.load(handle)['shards']
    return [os.path.join(path, s['raw_data']['basename']) for s in shards], [int(s['samples']) for s in shards]


def _open(file: str, count: int) -> tuple[mmap.mmap, list[int]]:
    with open(file, 'rb') as handle:
        mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, np.frombuffer(mm, '<u4', count=count + 1, offset=4).tolist()


def _iter_small(files: list[str], counts: list[int], shards: list[int], indices: list[int]) -> Iterator[dict]:
    head, read_id = _HEAD, _ID
    maps: list[Any] = [None] * len(files)
    tables: list[Any] = [None] * len(files)
    for shard, index in zip(shards, indices):
        mm = maps[shard]
        if mm is None:
            mm, tables[shard] = _open(files[shard], counts[shard])
            maps[shard] = mm
        start = tables[shard][index]
        end = start + 4 + head(mm, start)[0]
        yield {'data': mm[start + 4:end], 'id': read_id(mm, end)[0]}


def _iter_image(files: list[str], counts: list[int], shards: list[int], indices: list[int]) -> Iterator[dict]:
    read_id, frombuffer, uint8 = _ID, np.frombuffer, np.uint8
    maps: list[Any] = [None] * len(files)
    tables: list[Any] = [None] * len(files)
    for shard, index in zip(shards, indices):
        mm = maps[shard]
        if mm is None:
            mm, tables[shard] = _open(files[shard], counts[shard])
            maps[shard] = mm
        start = tables[shard][index]
        yield {'id': read_id(mm, start)[0], 'image': frombuffer(mm, uint8, 3072, start + 8).reshape(32, 32, 3)}


class FloorDataset:
    """An iterable over the MDS directory in id order or one global permutation (``seed``)."""

    def __init__(self, case: str, path: str, shuffle: bool, seed: int) -> None:
        self.case = case
        self.files, self.counts = _shards(path)
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[dict]:
        from torch.utils.data import get_worker_info
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        total = sum(self.counts)
        order = np.random.default_rng(self.seed).permutation(total) if self.shuffle else np.arange(total)
        mine = order[worker * total // workers:(worker + 1) * total // workers]
        ends = np.cumsum(self.counts)
        shards = np.searchsorted(ends, mine, side='right')
        indices = mine - (ends - np.asarray(self.counts))[shards]
        loop = _iter_small if self.case == 'small' else _iter_image
        return loop(self.files, self.counts, shards.tolist(), indices.tolist())


class FloorAccess:
    """``floor[i]``: bisect the shard, map it on first use (kept open), slice the sample."""

    def __init__(self, case: str, path: str) -> None:
        self.case = case
        self.files, self.counts = _shards(path)
        self.ends = np.cumsum(self.counts).tolist()
        self.maps: list[Any] = [None] * len(self.files)
        self.tables: list[Any] = [None] * len(self.files)

    def __len__(self) -> int:
        return self.ends[-1]

    def __getitem__(self, sample_id: int) -> dict[str, Any]:
        shard = bisect.bisect_right(self.ends, sample_id)
        index = sample_id - (self.ends[shard - 1] if shard else 0)
        mm = self.maps[shard]
        if mm is None:
            mm, self.tables[shard] = _open(self.files[shard], self.counts[shard])
            self.maps[shard] = mm
        start = self.tables[shard][index]
        if self.case == 'small':
            end = start + 4 + _HEAD(mm, start)[0]
            return {'data': mm[start + 4:end], 'id': _ID(mm, end)[0]}
        return {'id': _ID(mm, start)[0], 'image': np.frombuffer(mm, np.uint8, 3072, start + 8).reshape(32, 32, 3)}


def dataset(case: str, path: str, *, shuffle: bool, batch_size: int, seed: int, remote: str | None = None,
            endpoint: str | None = None) -> Any:
    """The floor as a torch IterableDataset."""
    from torch.utils.data import IterableDataset

    class _Iterable(FloorDataset, IterableDataset):
        pass

    return _Iterable(case, path, shuffle, seed)


def random_access(case: str, path: str) -> Any:
    """The floor's ``ds[i]``."""
    return FloorAccess(case, path)
