"""The simulator reads a real ``index.json`` streamed into compact arrays (issue 15): the same shape as the
per-shard readers give, in bounded memory, with invalid entries still refused."""

from __future__ import annotations

import json
import os
import tracemalloc

import numpy as np
import pytest

from streaming_core.errors import IndexFormatError
from streaming_core.reading.index_file import load_index
from streaming_core.tools.simulation import DatasetShape
from tests.fixtures.data import write_mds


@pytest.mark.parametrize('compression', [None, 'zstd'])
def test_the_streamed_shape_equals_the_readers_shape(tmp_path, compression):
    local = write_mds(str(tmp_path / 'ds'), 90, size_limit=300, compression=compression)
    path = os.path.join(local, 'index.json')
    expected = DatasetShape.from_index(load_index(path), path, os.path.getsize(path))
    shape = DatasetShape.from_location(local)
    for name in ('samples_per_shard', 'raw_bytes', 'download_bytes'):
        assert np.array_equal(getattr(shape, name), getattr(expected, name)), name
    assert (shape.index_bytes, shape.source) == (expected.index_bytes, expected.source)
    if compression:
        assert (shape.download_bytes < shape.raw_bytes).any()


def test_a_big_index_is_read_in_bounded_memory(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 32, size_limit=600)
    path = os.path.join(local, 'index.json')
    real = load_index(path)['shards']
    shards = []
    for i in range(40_000):
        entry = json.loads(json.dumps(real[i % len(real)]))
        entry['raw_data']['basename'] = f'shard.{i:07}.mds'
        shards.append(entry)
    with open(path, 'w') as handle:
        json.dump({'shards': shards, 'version': 2}, handle)
    del shards
    tracemalloc.start()
    try:
        shape = DatasetShape.from_location(local)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert shape.num_shards == 40_000 and shape.num_samples == 320_000
    assert peak < 12 * 2 ** 20, f'peak {peak} bytes for a {os.path.getsize(path)}-byte index'


def test_invalid_entries_are_still_refused(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 32, size_limit=600)
    path = os.path.join(local, 'index.json')
    index = load_index(path)
    index['shards'][1]['samples'] = -1
    with open(path, 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(IndexFormatError, match='shard 1'):
        DatasetShape.from_location(local)
    index['shards'] = []
    with open(path, 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(ValueError, match='lists no shards'):
        DatasetShape.from_location(local)
