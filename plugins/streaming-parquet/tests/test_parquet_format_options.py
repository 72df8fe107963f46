"""The core's ``Stream(columns=..., format_options=...)`` on Parquet directories: the options reach the ``parquet``
index builder, select the columns read (in one process and in DataLoader workers), are part of the derived index's
identity (another projection on the same cache is another index, never a stale one), and an option the format does
not take is refused naming it and the format."""

from __future__ import annotations

import os
import pickle
from typing import Any

import pytest
from parquet_data import row, write_parquet

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.plugin_api import IndexFormatError
from streaming_core.reading.derived_index import FormatOptionError


def _loader_rows(dataset: StreamingDataset, workers: int) -> list[dict[str, Any]]:
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=workers, collate_fn=lambda batch: batch)
    return [sample for batch in loader for sample in batch]


def _check_projection(dataset: StreamingDataset, workers: int) -> None:
    samples = _loader_rows(dataset, workers)
    assert sorted(s['id'] for s in samples) == list(range(60))
    for sample in samples:
        assert list(sample) == ['text', 'id'] and sample['text'] == row(sample['id'])['text']


def test_stream_columns_in_one_process(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=2, rows=30, row_group=10)
    stream = Stream(local=data, columns=['text', 'id'])
    assert stream.columns == ['text', 'id'] and stream.format_options == {'columns': ['text', 'id']}
    dataset = StreamingDataset(streams=[stream], batch_size=4, shuffle=True, shuffle_seed=3)
    _check_projection(dataset, 0)
    assert dataset[7] == {'text': row(7)['text'], 'id': 7}
    assert dataset.streams[0].index_identity.startswith('derived:parquet[columns=text,id]:')
    # The dataset's own Stream, configured through stream_config, and a pickled stream keep their options.
    configured = StreamingDataset(local=data, stream_config={'columns': ['text', 'id']}, batch_size=4)
    assert configured[3] == {'text': row(3)['text'], 'id': 3}
    assert pickle.loads(pickle.dumps(stream)).format_options == {'columns': ['text', 'id']}
    # The dataset's own arguments: columns= and format_options=, the same projection.
    direct = StreamingDataset(local=data, columns=['text', 'id'], batch_size=4)
    assert direct[3] == {'text': row(3)['text'], 'id': 3}
    assert StreamingDataset(local=data, format_options={'columns': ['id']}, batch_size=4)[5] == {'id': 5}
    with pytest.raises(ValueError, match='columns'):
        StreamingDataset(local=data, columns=['id'], format_options={'columns': ['id']}, batch_size=4)


@pytest.mark.slow
def test_stream_columns_with_two_workers(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=2, rows=30, row_group=10)
    dataset = StreamingDataset(streams=[Stream(local=data, columns=['text', 'id'])], batch_size=4, shuffle=True)
    _check_projection(dataset, 2)


def test_changing_columns_on_the_same_cache_gives_the_right_columns(tmp_path: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    write_parquet(remote, files=2, rows=20, row_group=10)
    identities = []
    for columns in (['id'], ['text', 'score'], None, ['id']):
        dataset = StreamingDataset(streams=[Stream(remote=remote, local=local, columns=columns)], batch_size=2)
        sample = dataset[5]
        want = row(5)
        expected = columns or list(want)
        assert list(sample) == expected, columns
        assert all(sample[name] == want[name] for name in expected if name not in ('vec',))
        identities.append(dataset.streams[0].index_identity)
    assert len(set(identities[:3])) == 3 and identities[3] == identities[0]


def test_hugging_face_split_and_dataset_defaults(tmp_path: Any) -> None:
    hub = str(tmp_path / 'hub')
    write_parquet(os.path.join(hub, 'data'), files=1, rows=10, row_group=5, prefix='train')
    write_parquet(os.path.join(hub, 'data'), files=1, rows=4, row_group=5, prefix='test', start=100)
    stream = Stream(local=hub, format='parquet', format_options={'split': 'test'})
    assert stream.split == ''  # the Hugging Face split is an option, not a subdirectory
    assert sorted(s['id'] for s in StreamingDataset(streams=[stream], batch_size=2)) == [100, 101, 102, 103]
    # A dataset's options are defaults under the stream's own.
    merged = Stream(local=hub, format_options={'split': 'train'})
    merged.apply_default({'format_options': {'columns': ['id'], 'split': 'test'}})
    assert merged.format_options == {'columns': ['id'], 'split': 'train'}


def test_unknown_option_and_bad_values_are_refused(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_parquet(data, files=1, rows=10, row_group=5)
    with pytest.raises(FormatOptionError) as err:
        StreamingDataset(streams=[Stream(local=data, format_options={'colums': ['id']})], batch_size=2)
    text = str(err.value)
    assert "'colums'" in text and "'parquet' format does not take it" in text and "'columns'" in text
    assert isinstance(err.value, ValueError)
    with pytest.raises(FormatOptionError, match="format 'parquet'.*decode_images must be True or False"):
        StreamingDataset(streams=[Stream(local=data, format_options={'decode_images': 'yes'})], batch_size=2)
    with pytest.raises(IndexFormatError, match="has no column 'nope'"):
        StreamingDataset(streams=[Stream(local=data, columns=['nope'])], batch_size=2)
    with pytest.raises(ValueError, match='given twice'):
        Stream(local=data, columns=['id'], format_options={'columns': ['text']})
    with pytest.raises(TypeError, match="format option 'when' must be JSON data"):
        Stream(local=data, format_options={'when': object()})
    with pytest.raises(TypeError, match='must be a dict'):
        Stream(local=data, format_options=['columns'])  # type: ignore[arg-type]


def test_a_streaming_index_takes_columns_but_refuses_other_options(tmp_path: Any) -> None:
    from streaming_core import MDSWriter
    out = str(tmp_path / 'mds')
    with MDSWriter(out=out, columns={'id': 'int'}) as writer:
        for i in range(4):
            writer.write({'id': i})
    assert StreamingDataset(local=out, batch_size=2)[1] == {'id': 1}
    assert StreamingDataset(streams=[Stream(local=out, columns=['id'])], batch_size=2)[1] == {'id': 1}
    with pytest.raises(FormatOptionError, match=r"format option 'split' for .*streaming index\.json"):
        StreamingDataset(streams=[Stream(local=out, format_options={'split': 'train'})], batch_size=2)
