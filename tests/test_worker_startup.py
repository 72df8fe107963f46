"""Issue 15: a worker's set-up before its first sample does not grow with its share.

An epoch's per-position tables (:mod:`streaming_core.reading.epoch_positions`) are built chunk by chunk: the first
sample waits only for the first, small chunk. These tests count the positions located and converted before the first
sample (in the main process and in DataLoader workers), and check that building in chunks changes nothing: the same
runs as over the whole share, the same samples in the same order, the same shard opens (one per shard without a cache
limit, one per run with one), ``yielded``, and the ``read=`` and ``on_bad_sample='replace'`` paths.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from streaming_core import StreamingDataset
from streaming_core.reading import epoch_positions
from streaming_core.reading.epoch_positions import EpochPositions, chunk_bounds, shard_runs
from tests.fixtures.data import ids_of, write_mds


@pytest.fixture(scope='module')
def big_share(tmp_path_factory: Any) -> str:
    """50,000 tiny samples: a share far larger than the first chunk."""
    return write_mds(str(tmp_path_factory.mktemp('big') / 'ds'), 50_000, size_limit=1 << 16, sample_size=8)


def _orders(num_samples: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(15)
    blocks = np.concatenate([rng.permutation(np.arange(b, min(b + 60, num_samples)))
                             for b in rng.permutation(np.arange(0, num_samples, 60))])
    return {'sorted': np.arange(num_samples, dtype=np.int64),
            'shuffled': rng.permutation(num_samples).astype(np.int64),
            'blocks': blocks.astype(np.int64),
            'revisits': rng.integers(0, num_samples, 3 * num_samples).astype(np.int64)}


def test_chunk_bounds_grow_to_the_largest_chunk() -> None:
    assert chunk_bounds(0) == [0]
    assert chunk_bounds(10, 3, 7) == [0, 3, 9, 10]
    assert chunk_bounds(40, 3, 7) == [0, 3, 9, 16, 23, 30, 37, 40]
    bounds = chunk_bounds(10**6)
    assert bounds[1] == epoch_positions.FIRST_CHUNK and max(np.diff(bounds)) == epoch_positions.CHUNK


@pytest.mark.parametrize('gap', [None, 0, 3, 40])
@pytest.mark.parametrize('sizes', [(1, 4), (3, 7), (50, 200), (4096, 65536)])
def test_chunked_runs_equal_the_whole_share(mds_dir: Any, gap: int | None, sizes: tuple[int, int]) -> None:
    """Runs stitched across chunks are exactly :func:`shard_runs` over the whole share, each position belongs to its
    shard's run, and an end declared final never changes afterwards."""
    catalogue = StreamingDataset(local=mds_dir(600), batch_size=4).catalogue
    for name, ids in _orders(600).items():
        whole_shards, whole_rows = catalogue.locate_many(ids)
        positions = EpochPositions(catalogue, ids, gap, ids_as_rows=False, piece=32, first=sizes[0],
                                   largest=sizes[1])
        snapshots = []
        while not positions.complete:
            positions.build_next()
            pos = positions.converted
            while pos > 0 and not positions.ends_final_before(pos):
                pos -= 1
            snapshots.append({k: positions.run(k) for k in range(positions.num_runs) if positions.run(k)[2] < pos})
        runs = [positions.run(k) for k in range(positions.num_runs)]
        expected = list(zip(*(a.tolist() for a in shard_runs(whole_shards, gap))))
        assert runs == expected, name
        for final in snapshots:  # ends reported final then are the final ends
            assert all(runs[k] == run for k, run in final.items()), name
        chunks = [positions.chunk(c) for c in range(positions.num_chunks)]
        assert sum((c.shards for c in chunks), []) == whole_shards.tolist()
        assert sum((c.rows for c in chunks), []) == whole_rows.tolist()
        for chunk in chunks:
            for offset, k in enumerate(chunk.runs.tolist()):
                shard, start, end = runs[k]
                assert shard == chunk.shards[offset] and start <= chunk.lo + offset <= end


def _iterator_of(dataset: StreamingDataset) -> Any:
    return dataset._position.iterator  # the EpochIterator of the epoch being read


def test_first_sample_converts_only_the_first_chunk(big_share: str) -> None:
    dataset = StreamingDataset(local=big_share, batch_size=4, shuffle=True)
    samples = iter(dataset)
    first = next(samples)
    iterator = _iterator_of(dataset)
    assert iterator.count == 50_000
    assert iterator._positions.converted <= epoch_positions.FIRST_CHUNK
    rest = ids_of(samples)
    assert sorted([first['id'], *rest]) == list(range(50_000))
    assert iterator._positions.complete


class _FirstSampleProbe(StreamingDataset):
    """Yields, from each worker, how many positions its iterator had converted when its first sample came."""

    def __iter__(self) -> Any:
        samples = super().__iter__()
        next(samples)
        iterator = _iterator_of(self)
        yield {'converted': iterator._positions.converted, 'share': iterator.count, 'pid': os.getpid()}


@pytest.mark.slow
def test_dataloader_workers_convert_only_the_first_chunk(big_share: str) -> None:
    from torch.utils.data import DataLoader
    dataset = _FirstSampleProbe(local=big_share, batch_size=4, shuffle=True)
    reports = list(DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context='fork'))
    assert len({r['pid'] for r in reports}) == 2
    for report in reports:
        assert report['share'] >= 20_000
        assert report['converted'] <= epoch_positions.FIRST_CHUNK


class _Reading(StreamingDataset):
    """Overrides ``__getitem__``: the ``read=`` path."""

    def __getitem__(self, index: int) -> Any:
        return {'id': int(super().__getitem__(index)['id'])}


def _epoch(path: str, cache: str, chunks: tuple[int, int], monkeypatch: Any, cls: type = StreamingDataset,
           **kwargs: Any) -> tuple[list[int], list[int], list[int]]:
    """One epoch with the given chunk sizes: ``(ids, shards opened in order, yielded after each sample)``."""
    monkeypatch.setattr(epoch_positions, 'FIRST_CHUNK', chunks[0])
    monkeypatch.setattr(epoch_positions, 'CHUNK', chunks[1])
    dataset = cls(remote=path, local=cache, batch_size=4, shuffle=True, shuffle_block_size=40, predownload=6,
                  **kwargs)
    manager = dataset.shard_manager
    opened: list[int] = []
    plain = manager._open_ready

    def recording(shard: int, on_wait: Any = None) -> Any:
        opened.append(shard)
        return plain(shard, on_wait)

    manager._open_ready = recording
    ids, yielded = [], []
    for sample in dataset:
        ids.append(int(sample['id']))
        yielded.append(_iterator_of(dataset).yielded)
    return ids, opened, yielded


@pytest.mark.parametrize('cache_limit', [None, '1mb'])
@pytest.mark.parametrize('cls', [StreamingDataset, _Reading])
def test_an_epoch_is_the_same_in_small_chunks(tmp_path: Any, monkeypatch: Any, cache_limit: str | None,
                                              cls: type) -> None:
    """Tiny chunks (3, then 7 positions) against one chunk: the same samples, ``yielded`` counting each, and every
    shard opened once (no cache limit) or once per run (cache limit: a shard is released only after its run)."""
    remote = write_mds(str(tmp_path / 'remote'), 400, size_limit=1 << 10)
    runs = []
    for n, chunks in enumerate([(1 << 20, 1 << 20), (3, 7)]):
        ids, opened, yielded = _epoch(remote, str(tmp_path / f'cache{n}'), chunks, monkeypatch, cls,
                                      cache_limit=cache_limit)
        assert yielded == list(range(1, len(ids) + 1))
        runs.append((ids, opened))
    (ids, opened), (small_ids, small_opened) = runs
    assert small_ids == ids and sorted(ids) == list(range(400))
    dataset = StreamingDataset(local=str(tmp_path / 'cache0'), batch_size=4)
    shards = dataset.catalogue.locate_many(np.asarray(ids, dtype=np.int64))[0]
    expected = shard_runs(shards, None if cache_limit is None else 6)[0].tolist()
    if cache_limit is None:
        assert sorted(small_opened) == sorted(opened) == sorted(expected) == list(range(dataset.num_shards))
    else:
        assert len(expected) > dataset.num_shards  # shards are revisited after gaps: several runs each
        assert sorted(small_opened) == sorted(opened) == sorted(expected)


def test_bad_samples_are_replaced_the_same_in_small_chunks(tmp_path: Any, monkeypatch: Any) -> None:
    remote = write_mds(str(tmp_path / 'remote'), 300, size_limit=1 << 10)

    def flaky(sample: dict[str, Any]) -> dict[str, Any]:
        if sample['id'] % 7 == 3:
            raise ValueError('bad sample')
        return sample

    results = [_epoch(remote, str(tmp_path / f'cache{n}'), chunks, monkeypatch, on_bad_sample='replace',
                      transform=flaky)[0] for n, chunks in enumerate([(1 << 20, 1 << 20), (3, 7)])]
    assert results[0] == results[1] and len(results[0]) == 300
    assert not any(i % 7 == 3 for i in results[0])
