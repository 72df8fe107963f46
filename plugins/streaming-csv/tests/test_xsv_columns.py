"""``columns=`` on CSV, TSV and XSV streams (issue 16): samples hold only the chosen columns, in that order, and
only their fields are decoded."""

from __future__ import annotations

import os
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.errors import ShardCorruptError
from streaming_core.reading.derived_index import FormatOptionError
from streaming_csv import CSVWriter, TSVWriter, XSVWriter

COLUMNS = {'id': 'int', 'text': 'str', 'score': 'float'}
WRITERS = {'csv': lambda **kw: CSVWriter(columns=COLUMNS, **kw), 'tsv': lambda **kw: TSVWriter(columns=COLUMNS, **kw),
           'xsv': lambda **kw: XSVWriter(columns=COLUMNS, separator='|', **kw)}


def write(out: str, fmt: str, count: int = 10) -> str:
    with WRITERS[fmt](out=out, size_limit=120) as writer:
        for i in range(count):
            writer.write({'id': i, 'text': f'row {i}', 'score': 12345.5 + i})
    return out


@pytest.mark.parametrize('fmt', sorted(WRITERS))
def test_projection_equals_the_whole_samples_subset(tmp_path: Any, fmt: str) -> None:
    out = write(str(tmp_path / fmt), fmt)
    whole = StreamingDataset(local=out, batch_size=2)
    ds = StreamingDataset(streams=[Stream(local=out, columns=['score', 'id'])], batch_size=2)
    assert len(ds.samples_per_shard) > 1
    assert [ds[i] for i in range(10)] == [{'score': whole[i]['score'], 'id': whole[i]['id']} for i in range(10)]
    assert [list(s) for s in ds] == [['score', 'id']] * 10
    with pytest.raises(FormatOptionError, match=rf"'txt'.*format '{fmt}'.*\['id', 'score', 'text'\]"):
        StreamingDataset(local=out, columns=['txt'], batch_size=2)


def test_projected_away_fields_are_not_decoded(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'csv'), 'csv')
    for name in os.listdir(out):
        if name.endswith('.csv'):
            path = os.path.join(out, name)
            with open(path, 'rb') as handle:
                data = handle.read()
            with open(path, 'wb') as handle:
                handle.write(data.replace(b'1234', b'zzzz'))  # every score is no float now
    with pytest.raises(ShardCorruptError, match='is not a valid float'):
        StreamingDataset(local=out, batch_size=2)[0]
    ds = StreamingDataset(local=out, columns=['text', 'id'], batch_size=2)
    assert list(ds) == [{'text': f'row {i}', 'id': i} for i in range(10)]
