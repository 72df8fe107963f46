"""Units that share a file in the shard catalogue: consecutive units naming one file are grouped under the first
(``file_of_shard``), counted once in ``max_size_per_shard``; units of one file that do not follow each other are
refused; a format that does not declare ``units_share_files`` is never grouped (no name is compared)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_core import StreamingDataset
from streaming_core.errors import IndexFormatError
from streaming_core.reading.catalogue import ShardCatalogue
from tests.deps import require
from tests.fixtures.data import write_mds


def _reader(name: str, samples: int, size: int, format_name: str) -> Any:
    return SimpleNamespace(samples=samples, parts=[(SimpleNamespace(basename=name, bytes=size), None)],
                           max_size=size, format_name=format_name)


def _catalogue(*per_stream: list[tuple[str, int]], format_name: str = 'parquet') -> ShardCatalogue:
    # Readers given as lists (a stream's own get_shards): grouped only when their format declares units_share_files
    # (Parquet does; MDS does not).
    require('streaming_parquet')
    streams = [SimpleNamespace(name=f's{i}', index_path=lambda: 'index.json') for i in range(len(per_stream))]
    readers = [[_reader(name, samples, 1000 + len(name), format_name) for name, samples in units]
               for units in per_stream]
    return ShardCatalogue(streams, readers)


def test_consecutive_units_of_one_file_are_grouped_per_stream() -> None:
    catalogue = _catalogue([('a', 3), ('a', 4), ('b', 5)], [('a', 1), ('c', 2), ('c', 2)])
    assert catalogue.shares_files
    assert catalogue.file_of_shard.tolist() == [0, 0, 2, 3, 4, 4]  # 'a' of the second stream is another file
    assert [list(catalogue.units_of_file(unit)) for unit in range(6)] == [[0, 1], [0, 1], [2], [3], [4, 5], [4, 5]]
    assert catalogue.max_size_per_shard.tolist() == [1001, 0, 1001, 1001, 1001, 0]  # each file once
    assert catalogue.num_samples == 17 and catalogue.locate(7) == (2, 0)


def test_units_of_one_file_must_follow_each_other() -> None:
    with pytest.raises(IndexFormatError, match=r"units 0 and 2 both name a\b.*must follow each other"):
        _ = _catalogue([('a', 3), ('b', 4), ('a', 5)]).file_of_shard


def test_readers_of_a_format_without_shared_files_are_never_grouped() -> None:
    # A custom stream's get_shards may list one MDS file twice (even apart): no grouping, no refusal.
    catalogue = _catalogue([('a', 3), ('b', 4), ('a', 5), ('a', 1)], format_name='mds')
    assert not catalogue.shares_files and catalogue.file_of_shard.tolist() == [0, 1, 2, 3]


def test_one_file_per_unit_formats_are_not_grouped(tmp_path: Any) -> None:
    remote = write_mds(str(tmp_path / 'mds'), 40, size_limit=1 << 9)
    dataset = StreamingDataset(local=remote, batch_size=4)
    catalogue = dataset.catalogue
    assert catalogue.num_shards > 1 and not catalogue.shares_files
    assert catalogue.file_of_shard.tolist() == list(range(catalogue.num_shards))
    assert list(catalogue.units_of_file(1)) == [1]
    assert os.path.isdir(remote)


def test_files_of_equal_size_and_name_length_stay_apart(tmp_path: Any) -> None:
    require('pyarrow')
    require('streaming_parquet')
    import pyarrow as pa
    import pyarrow.parquet as pq
    data = str(tmp_path / 'data')
    os.makedirs(data)
    for part in range(3):  # same size, same name length: only the names tell the files apart
        pq.write_table(pa.table({'x': [part] * 10}), os.path.join(data, f'p-{part}.parquet'), row_group_size=5)
    sizes = {os.path.getsize(os.path.join(data, name)) for name in os.listdir(data)}
    assert len(sizes) == 1
    dataset = StreamingDataset(local=data, batch_size=2)
    assert dataset.catalogue.file_of_shard.tolist() == [0, 0, 2, 2, 4, 4]
    assert [row['x'] for row in dataset] == [0] * 10 + [1] * 10 + [2] * 10


def _table(tmp_path: Any, names: list[str]) -> Any:
    """A mapped shard table of Parquet-like units whose first files have ``names``."""
    from streaming_core.reading.binary_index import build_binary, open_binary, write_binary
    from streaming_core.reading.shard_table import ShardTable
    entries = [{'format': 'parquet', 'version': 2, 'samples': 1, 'compression': None, 'hashes': [],
                'size_limit': None, 'zip_data': None, 'raw_data': {'basename': name, 'bytes': 7, 'hashes': {}},
                'columns': [['x', 'int64']], 'row_group': 0} for name in names]
    path = str(tmp_path / 'table.bin')
    if os.path.exists(path):
        os.remove(path)
    header, columns = build_binary({'version': 2, 'shards': entries}, 'index.json', 'id')
    write_binary(path, header, columns)
    header, arrays, mapping = open_binary(path, 'id')
    return ShardTable(SimpleNamespace(), path, header, arrays, mapping, False)


@given(st.lists(st.sampled_from(['a', 'b', 'ab', 'ba', 'c.parquet', 'é', 'part-1', 'part-2']), max_size=30))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_vectorised_name_check_finds_every_repeated_name(tmp_path: Any, names: list[str]) -> None:
    # The candidates are computed from hashes over the mapped string table: every unit whose name another unit of
    # the list also has must be among them (a false candidate only costs a comparison).
    from streaming_core.reading.shard_files import same_name_candidates
    table = _table(tmp_path, names) if names else None
    units = np.arange(len(names), dtype=np.int64)
    found = set(same_name_candidates(table, units).tolist()) if table is not None else set()
    repeated = {unit for unit, name in enumerate(names) if names.count(name) > 1}
    assert repeated <= found
    assert all(names.count(names[unit]) > 1 for unit in found)  # these short names never collide in the hash
    if table is not None:  # hashed a few units at a time (bounded memory), the same hashes
        from streaming_core.reading.shard_files import name_hashes
        assert name_hashes(table, units, chunk=3).tolist() == name_hashes(table, units).tolist()
