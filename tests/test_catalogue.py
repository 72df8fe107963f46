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


def test_sample_totals_are_exact_and_bounded():
    from streaming_core.errors import IndexFormatError
    from streaming_core.reading.catalogue import MAX_SAMPLES, _total_samples
    assert _total_samples(np.array([], np.int64), 'x/index.json') == 0
    assert _total_samples(np.array([3, 4], np.int64), 'x/index.json') == 7
    assert _total_samples(np.array([MAX_SAMPLES // 2, MAX_SAMPLES // 2], np.int64), 'x') == MAX_SAMPLES
    for counts in ([MAX_SAMPLES, 1], [1 << 62, 1 << 62], [(1 << 63) - 1, 1], [1 << 61] * 5):  # int64 sums wrap
        with pytest.raises(IndexFormatError, match=r'x/index.json records \d+ samples, more than'):
            _total_samples(np.array(counts, np.int64), 'x/index.json')


@pytest.mark.parametrize('counts', [{1: 1 << 62}, {1: 1 << 62, 2: 1 << 62}, {1: (1 << 63) - 1}, {2: 1 << 61}])
def test_huge_sample_counts_are_refused_at_construction_naming_the_shard(tmp_path, counts):
    """A count whose bytes-per-sample product wraps around int64 is still found by the format's limit check."""
    import json
    import os

    from streaming_core import StreamingDataset
    from streaming_core.errors import IndexFormatError
    from tests.fixtures.data import write_mds
    local = write_mds(str(tmp_path / 'ds'), 60, size_limit=300)
    path = os.path.join(local, 'index.json')
    index = json.loads(open(path).read())
    for shard, count in counts.items():
        index['shards'][shard]['samples'] = count
    with open(path, 'w') as handle:
        json.dump(index, handle)
    first = min(counts)
    for _ in range(2):  # built, then mapped
        with pytest.raises(IndexFormatError, match=rf'index.json shard {first}: {counts[first]} samples cannot fit'):
            StreamingDataset(local=local, batch_size=1)


def test_an_index_naming_one_shard_file_twice_is_refused(tmp_path):
    """An ``index.json`` that lists one MDS shard twice (edited by hand, merged twice): the samples would be served
    twice. It is refused naming both shards and the file, and again by the next construction (the binary form
    made from it is removed, never trusted)."""
    import json

    from streaming_core import StreamingDataset
    from streaming_core.errors import IndexFormatError
    from tests.fixtures.data import write_mds
    root = write_mds(str(tmp_path / 'data'), 60, size_limit=1 << 10)
    with open(tmp_path / 'data' / 'index.json') as handle:
        index = json.load(handle)
    index['shards'].append(index['shards'][0])
    with open(tmp_path / 'data' / 'index.json', 'w') as handle:
        json.dump(index, handle)
    for _ in range(2):
        with pytest.raises(IndexFormatError, match=r'shards 0 and \d+ both name the file shard.00000.mds'):
            StreamingDataset(local=root, batch_size=4)


def test_a_directory_of_splits_without_an_index_says_to_choose_a_split(tmp_path, capsys):
    """The quickstart's dataset root (``train/`` and ``val/`` each with an index.json) given without ``split``: the
    error names the splits and how to choose one, in the API and the CLI (it used to suggest ``format=``)."""
    from streaming_core import StreamingDataset
    from streaming_core.cli import main
    from streaming_core.errors import StreamingError
    from tests.fixtures.data import write_mds
    write_mds(str(tmp_path / 'train'), 20)
    write_mds(str(tmp_path / 'val'), 10)
    with pytest.raises(StreamingError, match=r"subdirectories \['train', 'val'\] have one: they are splits.*"
                                             r"split='train'"):
        StreamingDataset(local=str(tmp_path), batch_size=4)
    assert main(['verify', str(tmp_path)]) != 0
    assert '--split train' in capsys.readouterr().err
    assert main(['verify', str(tmp_path), '--split', 'val']) == 0
