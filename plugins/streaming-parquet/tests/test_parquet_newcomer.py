"""What a newcomer's walk through the Parquet and ``hf://`` docs found (issue 16): lists holding nulls, errors that
name the file, row group and column, the projection's error class, the decoded budget's variable, the missing
pillow extra and a split spanning several configurations."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.plugin_api import CodecError, FormatOptionError, IndexFormatError
from streaming_parquet import ParquetStream
from streaming_parquet.reader import decoded_budget
from streaming_parquet.selection import FileSelectionError

HERE = os.path.dirname(os.path.abspath(__file__))


def _write(path: str, table: Any, **kwargs: Any) -> str:
    import pyarrow.parquet as pq
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def test_lists_with_nulls_come_out_whole(tmp_path: Any) -> None:
    import pyarrow as pa
    table = pa.table({'id': [0, 1, 2, 3],
                      'tokens': [[1, 2], [4], [1, None, 3], None],
                      'scores': [[0.5], [None, 1.5], [], [2.0]],
                      'flags': pa.array([[True], [None], [False, True], []], pa.list_(pa.bool_()))})
    _write(str(tmp_path / 'd' / 'part.parquet'), table)
    dataset = StreamingDataset(local=str(tmp_path / 'd'), batch_size=1)
    first = dataset[0]  # the row group's other rows no longer break it
    assert isinstance(first['tokens'], np.ndarray) and first['tokens'].dtype == np.int64
    assert first['tokens'].tolist() == [1, 2] and first['flags'].dtype == np.bool_
    # A list of integers (or booleans) holding a null: a Python list with None there.
    assert dataset[2]['tokens'] == [1, None, 3] and type(dataset[2]['tokens']) is list
    assert dataset[1]['flags'] == [None]
    assert dataset[3]['tokens'] is None and dataset[3]['flags'].tolist() == []
    # A list of floats holding a null: a float array with nan there.
    scores = dataset[1]['scores']
    assert isinstance(scores, np.ndarray) and math.isnan(scores[0]) and scores[1] == 1.5
    rows = sorted(StreamingDataset(local=str(tmp_path / 'd'), batch_size=2, shuffle=True), key=lambda r: r['id'])
    assert [r['id'] for r in rows] == [0, 1, 2, 3] and rows[2]['tokens'] == [1, None, 3]


def test_a_value_that_cannot_be_decoded_names_file_row_group_and_column(tmp_path: Any) -> None:
    import pyarrow as pa
    # Year ~3 million: pyarrow reads it, but no Python datetime holds it.
    table = pa.table({'id': [0, 1], 'when': pa.array([0, 10 ** 17], pa.timestamp('ms'))})
    _write(str(tmp_path / 'd' / 'far.parquet'), table)
    dataset = StreamingDataset(local=str(tmp_path / 'd'), batch_size=1)
    with pytest.raises(CodecError, match=r"far\.parquet: row group 0, column 'when' \(timestamp\[ms\]\): its "
                                         r"values cannot be decoded \(OverflowError") as err:
        dataset[0]
    assert 'columns=' in str(err.value)
    narrow = StreamingDataset(streams=[Stream(local=str(tmp_path / 'd'), columns=['id'])], batch_size=1)
    assert narrow[1] == {'id': 1}


def test_an_unknown_column_is_a_format_option_error(tmp_path: Any) -> None:
    import pyarrow as pa
    _write(str(tmp_path / 'd' / 'a.parquet'), pa.table({'id': [0], 'text': ['x']}))
    for error in (FormatOptionError, IndexFormatError):  # the reading guide's class, and the one raised before
        with pytest.raises(error, match=r"has no column 'title'; its columns are \['id', 'text'\]"):
            StreamingDataset(streams=[Stream(local=str(tmp_path / 'd'), columns=['id', 'title'])], batch_size=1)


def test_decoded_budget_variable_is_checked() -> None:
    assert decoded_budget(None) == 512 << 20 and decoded_budget('') == 512 << 20
    assert decoded_budget('1000') == 1000 and decoded_budget('512mb') == 512 << 20
    assert decoded_budget('1.5gb') == 3 << 29 and decoded_budget('0') == 0
    assert decoded_budget('512MiB') == 512 << 20  # the unit the guide writes the default in
    for bad in ('abc', '-5', '12kbb'):
        with pytest.raises(ValueError, match=rf"STREAMING_PARQUET_DECODED_BYTES='{bad}' is not a byte size: give "
                                             r"a count of bytes >= 0 or a size such as 512mb"):
            decoded_budget(bad)


def test_decoded_budget_variable_is_read_by_the_dataset_not_the_plugin_load(tmp_path: Any) -> None:
    import pyarrow as pa
    data = str(tmp_path / 'd')
    _write(os.path.join(data, 'a.parquet'), pa.table({'id': [0, 1]}))
    code = ('import sys; from streaming_core import StreamingDataset\n'
            'import streaming_parquet.reader as r\n'
            'd = StreamingDataset(local=sys.argv[1], batch_size=1); print(d[1]["id"], r.decoded_bytes())\n')
    env = {**os.environ, 'STREAMING_PARQUET_DECODED_BYTES': '2mb'}
    done = subprocess.run([sys.executable, '-c', code, data], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['1', str(2 << 20)]
    env['STREAMING_PARQUET_DECODED_BYTES'] = 'abc'
    done = subprocess.run([sys.executable, '-c', code, data], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ValueError: STREAMING_PARQUET_DECODED_BYTES='abc' is not a byte size"), last
    assert 'uninstall' not in done.stderr and 'PluginLoadError' not in done.stderr  # not a broken plugin


def test_decode_images_without_pillow_names_the_extra(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa
    image_type = pa.struct([('bytes', pa.binary()), ('path', pa.string())])
    data = str(tmp_path / 'images')
    _write(os.path.join(data, 'train.parquet'),
           pa.table({'image': pa.array([{'bytes': b'not read', 'path': 'a.png'}], image_type)}))
    monkeypatch.setitem(sys.modules, 'PIL', None)  # as if pillow were not installed
    monkeypatch.setitem(sys.modules, 'PIL.Image', None)
    with pytest.raises(ImportError, match=r"decode_images=True needs pillow, which is not installed .*pip install "
                                          r"'streaming-parquet\[images\]'"):
        ParquetStream(local=data, decode_images=True)
    with pytest.raises(ImportError, match=r"streaming-parquet\[images\]"):
        StreamingDataset(streams=[Stream(local=data, format_options={'decode_images': True})], batch_size=1)
    # Without decode_images the column is its dict, pillow or not.
    plain = StreamingDataset(streams=[ParquetStream(local=data)], batch_size=1)
    assert plain[0]['image'] == {'bytes': b'not read', 'path': 'a.png'}


def test_a_split_in_several_configurations_needs_config(tmp_path: Any) -> None:
    import pyarrow as pa
    root = str(tmp_path / 'converted')  # the Hub's Parquet conversion of a dataset with two configurations
    _write(os.path.join(root, 'en', 'train', '0000.parquet'), pa.table({'id': [0, 1], 'lang': ['en', 'en']}))
    _write(os.path.join(root, 'fr', 'train', '0000.parquet'), pa.table({'id': [2], 'lang': ['fr']}))
    _write(os.path.join(root, 'fr', 'test', '0000.parquet'), pa.table({'id': [3], 'lang': ['fr']}))
    with pytest.raises(FileSelectionError, match=r"split='train' matches \{config\}/train/ in 2 configurations "
                                                 r"\(en, fr\): pass config= one of them \(e\.g\. config='en'\)"):
        StreamingDataset(streams=[ParquetStream(local=root, split='train')], batch_size=1)
    french = StreamingDataset(streams=[ParquetStream(local=root, split='train', config='fr')], batch_size=1)
    assert [row['lang'] for row in french] == ['fr']
    test = StreamingDataset(streams=[ParquetStream(local=root, split='test')], batch_size=1)  # one config has it
    assert [row['id'] for row in test] == [3]
