"""``streaming inspect`` and ``streaming verify`` on a directory of Parquet files (no index.json): the real CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def _streaming(*args: str) -> subprocess.CompletedProcess:
    script = os.path.join(os.path.dirname(sys.executable), 'streaming')
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=300)


def test_inspect_and_verify_a_parquet_directory(tmp_path):
    table = pa.table({'id': list(range(100)), 'text': [f'row {i}' for i in range(100)]})
    pq.write_table(table, str(tmp_path / 'a.parquet'), row_group_size=30)
    pq.write_table(table, str(tmp_path / 'b.parquet'), row_group_size=50)
    inspected = _streaming('inspect', str(tmp_path))
    assert inspected.returncode == 0, inspected.stderr
    # One unit per row group: a.parquet has 4 (30, 30, 30, 10 rows), b.parquet 2 (50, 50); each file counted once.
    # The units are named by the format's `unit_word` when it declares one ('row groups'), else 'units'.
    assert re.search(r'parquet \(6 (units|row groups) in 2 files\)', inspected.stdout), inspected.stdout
    assert 'Samples:       200' in inspected.stdout and 'min 10, mean 33.3, max 50' in inspected.stdout
    total = sum(os.path.getsize(tmp_path / name) for name in ('a.parquet', 'b.parquet'))
    assert f'({total} B)' in inspected.stdout
    assert 'id (int64), text (string)' in inspected.stdout
    assert f'Dataset index: none; derived from the files of {tmp_path}' in inspected.stdout
    assert not os.path.exists(tmp_path / 'index.json')  # the user's directory is never written
    verified = _streaming('verify', str(tmp_path))
    assert verified.returncode == 0, verified.stderr
    assert 'every sample decoded' in verified.stdout
    assert re.search(r'Verified 6 (units|row groups) in 2 files, 200 samples', verified.stdout), verified.stdout
    with open(tmp_path / 'b.parquet', 'r+b') as handle:  # a damaged footer
        handle.seek(-12, os.SEEK_END)
        handle.write(b'\0' * 8)
    broken = _streaming('inspect', str(tmp_path))
    assert broken.returncode != 0 and 'b.parquet' in broken.stdout + broken.stderr
