"""Writing real Parquet datasets for the streaming-parquet tests, and the rows they hold."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def row(i: int) -> dict[str, Any]:
    """The row with id ``i`` as written (and as it must be read back)."""
    return {'id': i, 'text': f'text-{i}' * (1 + i % 3), 'blob': bytes([i % 251]) * (1 + i % 5),
            'score': i / 4, 'vec': np.arange(i % 4, dtype=np.float32) + i, 'maybe': None if i % 7 == 0 else i * 3,
            'meta': {'n': i, 'tag': f't{i % 3}'}}


def write_parquet(directory: str, files: int = 3, rows: int = 100, row_group: int = 30, start: int = 0,
                  prefix: str = 'part') -> list[int]:
    """Write ``files`` Parquet files of ``rows`` rows each into ``directory``; returns the ids written."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    ids = []
    for f in range(files):
        chunk = list(range(start + f * rows, start + (f + 1) * rows))
        rows_ = [row(i) for i in chunk]
        table = pa.table({
            'id': pa.array([r['id'] for r in rows_], pa.int64()),
            'text': pa.array([r['text'] for r in rows_], pa.string()),
            'blob': pa.array([r['blob'] for r in rows_], pa.binary()),
            'score': pa.array([r['score'] for r in rows_], pa.float64()),
            'vec': pa.array([r['vec'].tolist() for r in rows_], pa.list_(pa.float32())),
            'maybe': pa.array([r['maybe'] for r in rows_], pa.int64()),
            'meta': pa.array([r['meta'] for r in rows_], pa.struct([('n', pa.int64()), ('tag', pa.string())])),
        })
        pq.write_table(table, os.path.join(directory, f'{prefix}-{f + start // max(rows, 1):05d}.parquet'),
                       row_group_size=row_group)
        ids += chunk
    return ids


def assert_row(sample: dict[str, Any]) -> None:
    """``sample`` equals the row written for its id, value by value and type by type."""
    want = row(sample['id'])
    assert sorted(sample) == sorted(want)
    for key, value in want.items():
        got = sample[key]
        if isinstance(value, np.ndarray):
            assert isinstance(got, np.ndarray) and got.dtype == value.dtype and got.flags.writeable, key
            np.testing.assert_array_equal(got, value)
        else:
            assert type(got) is type(value) and got == value, (key, got, value)
