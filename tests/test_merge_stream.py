"""``merge_index`` streams the partition indexes: the merged text is exactly ``merged_index_text``'s, partitions of
many shards merge in bounded memory, and a bad partition leaves the previous merged index in place (issue 15)."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest

from streaming_core.errors import IndexFormatError
from streaming_core.reading.index_file import load_index
from streaming_core.writing.merge import merge_index, merged_index_text
from tests.fixtures.data import write_mds


def _partition(path: str, num_shards: int, start: int) -> list[dict]:
    """A partition index of ``num_shards`` entries (copies of real ones, renamed; index-only)."""
    write_mds(path, 32, start=start, size_limit=600, hashes=['xxh64'])
    real = load_index(os.path.join(path, 'index.json'))['shards']
    shards = []
    for i in range(num_shards):
        entry = json.loads(json.dumps(real[i % len(real)]))
        entry['raw_data']['basename'] = f'shard.{i:07}.mds'
        shards.append(entry)
    with open(os.path.join(path, 'index.json'), 'w') as handle:
        json.dump({'shards': shards, 'version': 2}, handle)
    return shards


def _expected(parts: list[tuple[str, list[dict]]]) -> str:
    merged = []
    for name, shards in parts:
        for entry in shards:
            entry = json.loads(json.dumps(entry))
            entry['raw_data']['basename'] = f'{name}/{entry["raw_data"]["basename"]}'
            merged.append(entry)
    return merged_index_text(merged)


def test_the_streamed_merge_is_the_reference_text(tmp_path):
    out = str(tmp_path / 'out')
    parts = [(name, _partition(os.path.join(out, name), count, 100 * k))
             for k, (name, count) in enumerate([('0', 7), ('1', 1), ('10', 12)])]
    path = merge_index(out)
    with open(path) as handle:
        assert handle.read() == _expected(parts)


def test_many_shards_merge_in_bounded_memory(tmp_path):
    out = str(tmp_path / 'out')
    parts = [(name, _partition(os.path.join(out, name), 20_000, 0)) for name in ('a', 'b')]
    expected = _expected(parts)
    del parts
    tracemalloc.start()
    try:
        path = merge_index(out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = os.path.getsize(path)
    assert size > 10 * 2 ** 20
    with open(path) as handle:
        assert handle.read() == expected
    assert peak < 8 * 2 ** 20, f'peak {peak} bytes merging into a {size}-byte index'


def test_a_bad_partition_leaves_the_previous_merged_index(tmp_path):
    out = str(tmp_path / 'out')
    parts = [(name, _partition(os.path.join(out, name), 3, 0)) for name in ('0', '1')]
    path = merge_index(out)
    with open(os.path.join(out, '1', 'index.json'), 'w') as handle:
        handle.write('{"shards": [{"samples": 1}, 7], "version": 2}')
    with pytest.raises(IndexFormatError, match='must be a list of objects'):
        merge_index(out)
    with open(path) as handle:
        assert handle.read() == _expected(parts)
    assert [n for n in os.listdir(out) if n not in ('0', '1', 'index.json')] == []  # no temporary file left
