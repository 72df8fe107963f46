"""``columns=`` on MDS streams (issue 16): samples hold only the chosen columns, decoded from the same bytes as the
whole sample's, and the other columns' bytes are never decoded; the index, the plan and the resumption state do not
depend on the projection."""

from __future__ import annotations

import json
import os
import pickle
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
from PIL import Image  # a dependency of streaming-mds

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.errors import ShardCorruptError
from streaming_core.reading.derived_index import FormatOptionError
from streaming_core.reading.format_options import ProjectedShardTable
from streaming_mds import MDSWriter

#: One column per MDS encoding (the 28 of the reference, and a typed ndarray) with a value maker per sample.
ENCODINGS: dict[str, Any] = {
    'bytes': lambda i: bytes([i]) * (i + 1),
    'str': lambda i: 'é' * i,
    'int': lambda i: -i * 1000,
    'ndarray': lambda i: np.arange(i + 1, dtype=np.int32),
    'ndarray:int16:2,3': lambda i: np.full((2, 3), i, dtype=np.int16),
    **{dtype: (lambda i, dtype=dtype: np.dtype(dtype).type(i + 1)) for dtype in
       ('uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32', 'int64', 'float16', 'float32', 'float64')},
    'str_int': lambda i: i - 3,
    'str_float': lambda i: i / 4,
    'str_decimal': lambda i: Decimal(f'{i}.25'),
    'pil': lambda i: Image.new('RGB', (3, 2), (i * 20, 1, 2)),
    'jpeg': lambda i: Image.new('RGB', (8, 8), (i * 20, 0, 0)),
    'jpeg_array': lambda i: [_jpeg(i), _jpeg(i + 1)],
    'jpegarray': lambda i: [_jpeg(i)],
    'png': lambda i: Image.new('L', (4, 3), i * 10),
    'list[pil]': lambda i: [Image.new('RGB', (2, 2), (i, 0, 0))],
    'list[jpeg]': lambda i: [Image.new('RGB', (8, 8), (0, i * 9, 0))] * 2,
    'list[png]': lambda i: [Image.new('RGB', (2, 3), (0, 0, i))],
    'pkl': lambda i: {'set': {i, i + 1}},
    'json': lambda i: {'i': i, 'list': [None, 1.5]},
}
SAMPLES = 12


def _jpeg(i: int) -> bytes:
    from io import BytesIO
    out = BytesIO()
    Image.new('RGB', (8, 8), (0, 0, i * 20)).save(out, format='JPEG')
    return out.getvalue()


def _column(encoding: str) -> str:
    return 'c_' + ''.join(ch if ch.isalnum() else '_' for ch in encoding)


def _plain(value: Any) -> Any:
    """A comparable form of a decoded value (images as their mode, size and pixels; arrays as lists)."""
    if isinstance(value, Image.Image):
        return ('image', value.mode, value.size, value.tobytes())
    if isinstance(value, np.ndarray):
        return ('array', str(value.dtype), value.shape, value.tolist())
    if isinstance(value, np.generic):
        return ('scalar', str(value.dtype), value.item())
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return (type(value).__name__, value)


def write(out: str, columns: dict[str, str], make: Any, count: int = SAMPLES, **kwargs: Any) -> str:
    with MDSWriter(out=out, columns=columns, **kwargs) as writer:
        for i in range(count):
            writer.write(make(i))
    return out


@pytest.fixture(scope='module')
def every_encoding(tmp_path_factory: Any) -> str:
    columns = {'id': 'int', **{_column(enc): enc for enc in ENCODINGS}}
    return write(str(tmp_path_factory.mktemp('every')), columns,
                 lambda i: {'id': i, **{_column(enc): make(i) for enc, make in ENCODINGS.items()}}, size_limit=4000)


def test_every_encoding_projects_to_the_whole_samples_subset(every_encoding: str) -> None:
    whole = StreamingDataset(local=every_encoding, batch_size=4, allow_unsafe_types=True)
    expected = [whole[i] for i in range(SAMPLES)]
    assert len(whole.samples_per_shard) > 1  # several shards: readers made lazily are projected too
    for encoding in ENCODINGS:
        name = _column(encoding)
        ds = StreamingDataset(streams=[Stream(local=every_encoding, columns=[name, 'id'])], batch_size=4,
                              allow_unsafe_types=True)
        got = [ds[i] for i in (SAMPLES - 1, 0, 5, 6)] + list(ds)  # cold reads, then through open views
        for sample in got:
            assert list(sample) == [name, 'id'], encoding  # only the chosen columns, in the order given
            assert _plain(sample[name]) == _plain(expected[sample['id']][name]), encoding
        assert sorted(s['id'] for s in got[4:]) == list(range(SAMPLES))


def test_dataset_columns_and_order(every_encoding: str) -> None:
    chosen = ['json', 'str', 'id', 'png', 'int']
    names = [_column(enc) if enc != 'id' else 'id' for enc in chosen]
    ds = StreamingDataset(local=every_encoding, columns=names, batch_size=4, allow_unsafe_types=True)
    whole = StreamingDataset(local=every_encoding, batch_size=4, allow_unsafe_types=True)
    assert [list(ds[i]) for i in range(3)] == [names] * 3
    assert [_plain(v) for v in ds[7].values()] == [_plain(whole[7][n]) for n in names]
    # a projection is not part of the index's identity: same index version, same shards, same layout
    assert ds.streams[0].index_identity == whole.streams[0].index_identity
    assert ds.samples_per_shard.tolist() == whole.samples_per_shard.tolist()
    assert isinstance(ds.catalogue.sources[0], ProjectedShardTable)
    # a pickled dataset (a spawned worker's) keeps the projection
    back = pickle.loads(pickle.dumps(ds))
    assert list(back[3]) == names and _plain(back[3][names[0]]) == _plain(whole[3][names[0]])


def _corrupt(root: str, needle: bytes) -> int:
    """Overwrite every occurrence of ``needle`` in the shard files with as many bytes of invalid UTF-8 / JSON."""
    count = 0
    for name in os.listdir(root):
        if not name.endswith('.mds'):
            continue
        path = os.path.join(root, name)
        with open(path, 'rb') as handle:
            data = handle.read()
        count += data.count(needle)
        with open(path, 'wb') as handle:
            handle.write(data.replace(needle, b'\xff' * len(needle)))
    return count


def test_projected_away_columns_are_never_decoded(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'ds'), {'id': 'int', 'meta': 'json', 'image': 'png', 'text': 'str'},
                lambda i: {'id': i, 'meta': {'k': i}, 'image': Image.new('L', (2, 2), i), 'text': f'doc {i}'})
    assert _corrupt(out, b'{"k": ') == SAMPLES  # every sample's JSON is garbage now...
    assert _corrupt(out, b'IHDR') == SAMPLES    # ...and so is every PNG
    with pytest.raises(ShardCorruptError, match='cannot be decoded'):
        StreamingDataset(local=out, batch_size=4)[0]
    ds = StreamingDataset(local=out, columns=['text', 'id'], batch_size=4)
    assert ds[3] == {'text': 'doc 3', 'id': 3}            # a cold read (one positioned read)
    assert ds[4] == {'text': 'doc 4', 'id': 4}            # through the shard's open view
    assert list(ds) == [{'text': f'doc {i}', 'id': i} for i in range(SAMPLES)]  # the iterator's tight loop
    # the sizes of the skipped columns are still checked: a sample is still read whole or not at all
    with pytest.raises(ShardCorruptError, match='cannot be decoded'):
        StreamingDataset(local=out, columns=['meta'], batch_size=4)[0]


def test_unknown_column_fails_at_construction(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'ds'), {'id': 'int', 'text': 'str'}, lambda i: {'id': i, 'text': str(i)})
    with pytest.raises(FormatOptionError) as err:
        StreamingDataset(streams=[Stream(local=out, columns=['id', 'txt'])], batch_size=4)
    message = str(err.value)
    assert f"local={out!r}" in message and "'txt'" in message and "['id', 'text']" in message
    with pytest.raises(FormatOptionError, match="option 'split' for .*'mds' shards, whose format takes only 'columns'"):
        StreamingDataset(local=out, format_options={'split': 'train'}, batch_size=4)
    with pytest.raises(ValueError, match='non-empty list of distinct column names'):
        Stream(local=out, columns=['id', 'id'])


class PlusOne(StreamingDataset):
    """A subclass overriding ``get_item`` (the reference's pattern for transforms)."""

    def get_item(self, idx: int) -> Any:
        sample = super().get_item(idx)
        return {**sample, 'next': sample['id'] + 1}


def test_a_subclass_get_item_sees_the_projected_sample(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'ds'), {'id': 'int', 'text': 'str', 'blob': 'bytes'},
                lambda i: {'id': i, 'text': str(i), 'blob': b'x' * i})
    ds = PlusOne(local=out, columns=['id'], batch_size=4)
    assert ds[5] == {'id': 5, 'next': 6}
    assert list(ds) == [{'id': i, 'next': i + 1} for i in range(SAMPLES)]


def test_resumption_state_is_the_same_with_or_without_a_projection(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'ds'), {'id': 'int', 'text': 'str'}, lambda i: {'id': i, 'text': str(i)},
                count=60, size_limit=300)

    def dataset(**kwargs: Any) -> StreamingDataset:
        return StreamingDataset(local=out, batch_size=4, shuffle=True, shuffle_seed=7, num_canonical_nodes=2,
                                **kwargs)

    whole, projected = dataset(), dataset(columns=['id'])
    order = [s['id'] for s in whole]
    assert [s['id'] for s in projected] == order  # same plan
    state = projected.state_dict(num_samples=20, from_beginning=False)
    assert state == whole.state_dict(num_samples=20, from_beginning=False)
    resumed_whole, resumed_projected = dataset(), dataset(columns=['id'])
    resumed_whole.load_state_dict(state)
    resumed_projected.load_state_dict(json.loads(json.dumps(state)))
    rest = [s['id'] for s in resumed_whole]
    assert rest == order[20:] and [s['id'] for s in resumed_projected] == rest


@pytest.mark.slow
def test_two_dataloader_workers(tmp_path: Any) -> None:
    out = write(str(tmp_path / 'ds'), {'id': 'int', 'text': 'str', 'meta': 'json'},
                lambda i: {'id': i, 'text': str(i), 'meta': {'i': i}}, count=40, size_limit=200)
    _corrupt(out, b'{"i": ')
    ds = StreamingDataset(streams=[Stream(local=out, columns=['id', 'text'])], batch_size=4, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=2)
    seen = []
    for batch in loader:
        assert set(batch) == {'id', 'text'}
        assert [str(int(i)) for i in batch['id']] == list(batch['text'])
        seen.extend(int(i) for i in batch['id'])
    assert sorted(seen) == list(range(40))
