"""The shard catalogue: one table of streams -> shards -> samples, and the sample id -> (shard, row) map."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.reading.catalogue import ShardCatalogue


def _catalogue(per_stream: list[list[int]]) -> ShardCatalogue:
    streams = [SimpleNamespace(name=f's{i}') for i in range(len(per_stream))]
    readers = [[SimpleNamespace(samples=n) for n in sizes] for sizes in per_stream]
    return ShardCatalogue(streams, readers)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=6), min_size=1, max_size=5))
def test_tables_and_lookups_agree_with_a_flat_listing(per_stream):
    catalogue = _catalogue(per_stream)
    flat = [(s, j, n) for s, sizes in enumerate(per_stream) for j, n in enumerate(sizes)]
    assert catalogue.num_shards == len(flat)
    assert catalogue.stream_per_shard.tolist() == [s for s, _, _ in flat]
    assert catalogue.shard_in_stream.tolist() == [j for _, j, _ in flat]
    assert catalogue.samples_per_stream.tolist() == [sum(sizes) for sizes in per_stream]
    assert catalogue.shards_per_stream.tolist() == [len(sizes) for sizes in per_stream]
    owners = [(shard, row) for shard, (_, _, n) in enumerate(flat) for row in range(n)]
    assert catalogue.num_samples == len(owners)
    for sample_id, owner in enumerate(owners):
        assert catalogue.locate(sample_id) == owner
    if owners:
        shards, rows = catalogue.locate_many(np.arange(len(owners), dtype=np.int64))
        assert list(zip(shards.tolist(), rows.tolist())) == owners
        assert catalogue.sample_offset_per_shard[shards].tolist() == [i - r for i, r in enumerate(rows.tolist())]
    for bad in (-1, len(owners)):
        with pytest.raises(IndexError):
            catalogue.locate(bad)


def test_the_layout_identity_changes_with_any_shard_count():
    base = _catalogue([[3, 4], [5]])
    assert base.layout_identity() == _catalogue([[3, 4], [5]]).layout_identity()
    for other in ([[3, 4, 5]], [[3, 5], [5]], [[3, 4], [5, 0]], [[4, 3], [5]]):
        assert _catalogue(other).layout_identity() != base.layout_identity()


def test_streams_and_reader_lists_must_pair():
    with pytest.raises(ValueError, match='2 streams but 1'):
        ShardCatalogue([SimpleNamespace(), SimpleNamespace()], [[]])
