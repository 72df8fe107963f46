"""``columns=`` on JSON-lines streams (issue 16): samples hold only the chosen columns, in that order (a line is
still parsed whole: JSON has no column offsets)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.reading.derived_index import FormatOptionError
from streaming_jsonl import JSONWriter


def test_projection_equals_the_whole_samples_subset(tmp_path: Any) -> None:
    out = str(tmp_path / 'json')
    with JSONWriter(out=out, columns={'id': 'int', 'text': 'str', 'score': 'float'}, size_limit=100) as writer:
        for i in range(10):
            writer.write({'id': i, 'text': f'row {i}', 'score': i / 2})
    whole = StreamingDataset(local=out, batch_size=2)
    ds = StreamingDataset(streams=[Stream(local=out, columns=['text', 'id'])], batch_size=2)
    assert len(ds.samples_per_shard) > 1
    assert [ds[i] for i in range(10)] == [{'text': whole[i]['text'], 'id': whole[i]['id']} for i in range(10)]
    assert [list(s) for s in ds] == [['text', 'id']] * 10
    with pytest.raises(FormatOptionError, match=r"'txt'.*format 'json'.*\['id', 'score', 'text'\]"):
        StreamingDataset(local=out, columns=['txt', 'id'], batch_size=2)
