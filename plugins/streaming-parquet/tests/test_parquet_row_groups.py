"""A Parquet row group is a unit (what shuffles, partitions, batching, resumption and the cache's pins see); the
units of one file share it: downloaded once, counted once under ``cache_limit``, evicted only when none of its units
is in use, and evicting it makes all of them not ready. Real pyarrow files, a local directory as the remote."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import pytest
from parquet_data import assert_row, write_parquet

from streaming_core import StreamingDataset
from streaming_core.common.paths import state_dir
from streaming_core.reading.derived_index import (
    DERIVED_INDEX_NAME,
    DERIVED_LISTING_NAME,
    list_source,
    listing_identity,
)
from tests.fixtures.downloads import count_downloads


def _sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))}


def test_row_groups_are_units_of_one_file_downloaded_and_counted_once(tmp_path: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    ids = write_parquet(remote, files=3, rows=70, row_group=30)  # row groups of 30, 30, 10 rows per file
    fetched = count_downloads(monkeypatch)
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, shuffle_block_size=50,
                               cache_limit=1 << 20)
    assert len(dataset) == 210 and dataset.num_shards == 9
    assert dataset.samples_per_shard.tolist() == [30, 30, 10] * 3
    assert dataset.catalogue.file_of_shard.tolist() == [0, 0, 0, 3, 3, 3, 6, 6, 6]
    seen = [sample['id'] for sample in dataset]
    assert sorted(seen) == ids and seen != ids
    assert sorted(fetched) == sorted(_sizes(remote))  # each file once, however many of its units were read
    # Each file is counted once (under its first unit), so the cache holds exactly the files' bytes.
    assert dataset.cache_usage == sum(_sizes(remote).values())
    assert dataset.shard_manager.cache.present.tolist() == [size for size in _sizes(remote).values()
                                                            for size in (size, 0, 0)]


def test_a_file_is_evicted_only_when_none_of_its_units_is_in_use(tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import streaming_parquet.reader as reader_module
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_parquet(remote, files=2, rows=90, row_group=30)  # 3 units per file
    dataset = StreamingDataset(remote=remote, local=local, batch_size=4, cache_limit=1 << 20)
    manager = dataset.shard_manager
    first = os.path.join(local, 'part-00000.parquet')
    view = manager.open(1)  # the second row group of the first file, open (its file pinned)
    assert view[0]['id'] == 30 and os.path.isfile(first)
    assert manager.cache.evict(0) == 0 and manager.cache.evict_coldest() == -1  # pinned under the file's key
    manager.hold(1)  # an iterator reads unit 1
    dataset.evict_shard(0)  # another unit of the same file: the file stays
    assert os.path.isfile(first) and view[29]['id'] == 59
    assert_row(dataset[5])
    manager.release(1)
    dataset.evict_shard(2)  # no unit of the file is in use now: it goes, and every unit of it is not ready
    assert not os.path.exists(first)
    assert [manager.is_ready(unit) for unit in range(6)] == [False] * 3 + [False] * 3
    assert manager.cache.present[0] == 0 and dataset.cache_usage == 0
    fetched = count_downloads(monkeypatch)
    before = reader_module.decoded_cache.decodes
    sample = dataset[40]  # downloads the file again and decodes just its row group (unit 1)
    assert sample['id'] == 40 and fetched == ['part-00000.parquet']
    assert_row(sample)
    assert reader_module.decoded_cache.decodes - before == 1
    assert reader_module.decoded_cache.keys_of(manager.open_views[1]._token) == [(1, 0)]
    assert dataset.cache_usage == os.path.getsize(first)


def test_a_cache_of_one_and_a_half_files_evicts_while_units_are_read(tmp_path: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    ids = write_parquet(remote, files=3, rows=60, row_group=20)  # 3 units per file
    largest = max(_sizes(remote).values())
    fetched = count_downloads(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # below four times the largest file: meant here
        dataset = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, shuffle_seed=5,
                                   shuffle_block_size=120, cache_limit=largest * 3 // 2)
        seen = []
        for sample in dataset:
            seen.append(sample['id'])
            assert dataset.cache_usage <= largest * 3 // 2
    assert sorted(seen) == ids  # every row once: no unit lost its file while it was read
    assert len(fetched) > 3  # row groups of several files interleave: files were evicted and fetched again
    assert len([name for name in os.listdir(local) if name.endswith('.parquet')]) == 1


def test_an_index_kept_in_the_per_file_layout_is_rebuilt(tmp_path: Any) -> None:
    data, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    ids = write_parquet(data, files=2, rows=25, row_group=10)
    assert sorted(sample['id'] for sample in StreamingDataset(remote=data, local=local, batch_size=2)) == ids
    copies = {name: os.stat(os.path.join(local, name)).st_ino for name in _sizes(data)}
    sdir = state_dir(local)
    # What the previous streaming-parquet kept: one entry per file, under an identity without the index version.
    import pyarrow.parquet as pq
    columns = None
    shards = []
    for name, size in _sizes(data).items():
        meta = pq.read_metadata(os.path.join(data, name))
        columns = [[field.name, str(field.type)] for field in meta.schema.to_arrow_schema()]
        shards.append({'format': 'parquet', 'version': 2, 'samples': meta.num_rows, 'compression': None,
                       'hashes': [], 'size_limit': None, 'zip_data': None,
                       'raw_data': {'basename': name, 'bytes': size, 'hashes': {}}, 'columns': columns,
                       'row_groups': [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]})
    old = json.dumps({'shards': shards, 'version': 2}).encode()
    old_identity = listing_identity('parquet', list_source(data))
    import hashlib
    with open(os.path.join(sdir, DERIVED_INDEX_NAME), 'wb') as handle:
        handle.write(old)
    with open(os.path.join(sdir, DERIVED_LISTING_NAME), 'w') as handle:
        json.dump({'identity': old_identity, 'builder': 'parquet', 'source': data,
                   'index_sha256': hashlib.sha256(old).hexdigest(),
                   'files': [item.key() for item in list_source(data)]}, handle)
    dataset = StreamingDataset(remote=data, local=local, batch_size=2)
    assert dataset.streams[0].index_identity != old_identity
    assert dataset.num_shards == 6 and len(dataset) == 50
    kept = json.loads(open(os.path.join(sdir, DERIVED_INDEX_NAME)).read())
    assert [entry['row_group'] for entry in kept['shards']] == [0, 1, 2] * 2
    assert [sample['id'] for sample in dataset] == ids
    # The files did not change: the local copies were kept, not downloaded again.
    assert {name: os.stat(os.path.join(local, name)).st_ino for name in _sizes(data)} == copies


@pytest.mark.slow
def test_two_workers_share_files_under_a_small_cache_limit(tmp_path: Any) -> None:
    from streaming_core import StreamingDataLoader
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    ids = write_parquet(remote, files=8, rows=60, row_group=20)  # 24 units
    largest = max(_sizes(remote).values())
    limit = largest * 11 // 2  # each worker holds the files of the row groups its block reads: 2 or so
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # below four times the largest file: meant here
        dataset = StreamingDataset(remote=remote, local=local, batch_size=4, shuffle=True, shuffle_seed=9,
                                   shuffle_block_size=40, cache_limit=limit)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    seen = [sample['id'] for batch in loader for sample in batch]
    assert sorted(seen) == ids  # each row once
    assert dataset.cache_usage <= limit
    assert len(os.listdir(local)) < 8  # every file was read, some were evicted under the workers' units
