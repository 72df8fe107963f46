"""The data of the format trainer tests: one directory per format, each written by the tool users write it with.

- ``mds``: ``MDSWriter`` (ids ``MDS_START..``), several shards;
- ``parquet``: pyarrow's ``write_table`` (ids ``PARQUET_START..``), several files of several row groups each;
- ``webdataset``: the ``webdataset`` package's own ``TarWriter`` (ids ``WDS_START..`` as ``.cls``), several tars;
- ``litdata``: the streaming-litdata plugin's golden ``rows`` dataset, written by litdata 0.2.76's ``optimize``
  (ids ``0..39``).

Every sample id is unique across the four, so a run's sample log says which sample of which stream it trained on.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from tests.fixtures.data import sample as mds_sample
from tests.fixtures.data import write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LITDATA_GOLDEN = os.path.join(ROOT, 'plugins', 'streaming-litdata', 'tests', 'golden', 'rows')

#: name -> (first id, samples)
MDS_START, MDS_SAMPLES = 1000, 240
PARQUET_START, PARQUET_SAMPLES = 2000, 240
WDS_START, WDS_SAMPLES = 3000, 120
LITDATA_SAMPLES = 40
#: Parquet layout: 4 files of 60 rows in row groups of 16 (3 full groups and one of 12 per file).
PARQUET_FILES, PARQUET_ROW_GROUP = 4, 16
#: WebDataset layout: 3 tars of 40 samples.
WDS_TARS = 3


def ids_of_stream(name: str) -> list[int]:
    """Every sample id the stream ``name`` holds."""
    return {'mds': list(range(MDS_START, MDS_START + MDS_SAMPLES)),
            'parquet': list(range(PARQUET_START, PARQUET_START + PARQUET_SAMPLES)),
            'webdataset': list(range(WDS_START, WDS_START + WDS_SAMPLES)),
            'litdata': list(range(LITDATA_SAMPLES))}[name]


def stream_of(sample_id: int) -> str:
    """The stream that holds ``sample_id``."""
    for name in ('mds', 'parquet', 'webdataset', 'litdata'):
        if sample_id in ids_of_stream(name):
            return name
    raise ValueError(f'sample id {sample_id} belongs to no stream')


def write_parquet_ids(directory: str, start: int, count: int, files: int, row_group: int) -> None:
    """``count`` rows (``id``, ``text``) with ids from ``start`` in ``files`` Parquet files written by pyarrow in
    row groups of ``row_group`` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    per_file = count // files
    for part in range(files):
        ids = list(range(start + part * per_file, start + (part + 1) * per_file))
        table = pa.table({'id': pa.array(ids, pa.int64()), 'text': [f'row {i}' for i in ids]})
        path = os.path.join(directory, f'part-{part:05d}.parquet')
        pq.write_table(table, path, row_group_size=row_group)
        assert pq.ParquetFile(path).num_row_groups > 1, path


def write_webdataset(directory: str, start: int, count: int, tars: int) -> None:
    """``count`` samples (``.cls`` = id, ``.json``, ``.bin``) with ids from ``start`` in ``tars`` tars written by
    ``webdataset.TarWriter``."""
    import webdataset
    os.makedirs(directory, exist_ok=True)
    per_tar = count // tars
    for shard in range(tars):
        with webdataset.TarWriter(os.path.join(directory, f'shard-{shard:04d}.tar')) as sink:
            for i in range(start + shard * per_tar, start + (shard + 1) * per_tar):
                sink.write({'__key__': f'{i:06d}', 'cls': i, 'json': {'id': i}, 'bin': _wds_bin(i)})


def write_all(root: str) -> dict[str, str]:
    """Write the four directories under ``root``; returns ``{format: directory}``."""
    out = {name: os.path.join(root, name) for name in ('mds', 'parquet', 'webdataset', 'litdata')}
    write_mds(out['mds'], MDS_SAMPLES, start=MDS_START, size_limit=1 << 11)
    write_parquet_ids(out['parquet'], PARQUET_START, PARQUET_SAMPLES, PARQUET_FILES, PARQUET_ROW_GROUP)
    write_webdataset(out['webdataset'], WDS_START, WDS_SAMPLES, WDS_TARS)
    shutil.copytree(LITDATA_GOLDEN, out['litdata'])
    with open(os.path.join(out['litdata'], 'index.json')) as handle:  # written by litdata, not by us
        assert 'chunks' in json.load(handle)
    return out


def sample_id(sample: dict[str, Any]) -> int:
    """The id of a sample of any of the four streams, as each format's reader returns it (a WebDataset sample's
    ``.cls`` decoded to an int, the others' ``id`` column), after checking that every field of the sample is the
    one written for that id (an ``AssertionError`` naming the sample otherwise)."""
    if '__key__' in sample:
        i = int(sample['cls'])
        assert (sample['__key__'], sample['json'], sample['bin']) == (f'{i:06d}', {'id': i}, _wds_bin(i)), sample
        return i
    i = int(sample['id'])
    if 'data' in sample:  # MDS
        assert sorted(sample) == ['data', 'id'] and bytes(sample['data']) == mds_sample(i)['data'], sample
    elif 'labels' in sample:  # litdata's golden rows
        assert sample == {'id': i, 'text': f'row {i}', 'labels': [i, i + 1, i + 2]}, sample
    else:  # Parquet
        assert sample == {'id': i, 'text': f'row {i}'}, sample
    return i


def _wds_bin(i: int) -> bytes:
    return bytes([i % 251]) * (8 + i % 13)
