"""``columns=`` on litdata streams: an item keeps only those top-level keys, in that order, equal to the same keys
of the unprojected item for every layout of the golden datasets (classic, Arrow rows, zstd batch / sample / chunk);
the other keys' leaves are not decoded; an unknown key, or items that are not dicts, fail at construction naming
the key and the keys there are; the projection reaches DataLoader workers."""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.errors import IndexFormatError, ShardCorruptError
from streaming_core.plugin_api import FormatOptionError

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
if GOLDEN not in sys.path:
    sys.path.insert(0, GOLDEN)


def _copy(tmp_path: Any, name: str) -> str:
    out = str(tmp_path / name)
    shutil.copytree(os.path.join(GOLDEN, name), out)
    return out


@pytest.mark.parametrize('name, columns', [
    ('mixed', ['nested', 'id', 'photo', 'tmat']),
    ('rows', ['text', 'id']),
    ('arrow', ['labels']),
    ('arrow-zstd', ['cls', 'jpg']),
    ('mixed-zstd', ['name', 'vec', 'image']),
    ('mixed-zstd-sample', ['scores', 'mat']),
    ('mixed-zstd-chunk', ['id', 'blob']),
])
def test_projection_is_the_unprojected_item_restricted(tmp_path: Any, name: str, columns: list[str]) -> None:
    from make_golden import canonical
    data = _copy(tmp_path, name)
    full = StreamingDataset(local=data, batch_size=4)
    whole = [full[i] for i in range(len(full))]
    projected = StreamingDataset(local=data, batch_size=4, columns=columns)
    items = list(projected)
    assert len(items) == len(whole) == 40
    for i, (item, original) in enumerate(zip(items, whole)):
        assert list(item) == columns, f'{name} item {i}'
        assert canonical(item) == canonical({key: original[key] for key in columns}), f'{name} item {i}'
    assert canonical(projected[17]) == canonical({key: whole[17][key] for key in columns})


def test_unknown_key_fails_naming_it_and_the_keys(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'rows')
    with pytest.raises(IndexFormatError) as err:
        StreamingDataset(local=data, batch_size=4, columns=['id', 'label'])
    assert isinstance(err.value, FormatOptionError)  # what every format raises for an unknown column
    message = str(err.value)
    assert "no key 'label'" in message and "['id', 'text', 'labels']" in message and data in message


def test_items_that_are_not_dicts_have_no_keys(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'rows')
    path = os.path.join(data, 'index.json')
    with open(path) as handle:
        index = json.load(handle)
    index['config']['data_spec'] = index['config']['data_spec'].replace('builtins.dict', 'builtins.tuple', 1)
    with open(path, 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(IndexFormatError, match='are not dicts'):
        StreamingDataset(local=data, batch_size=4, columns=['id'])


def test_keys_left_out_are_not_decoded(tmp_path: Any) -> None:
    """The JPEG leaf of one item is overwritten with zeros: reading it whole fails, reading other keys does not."""
    data = _copy(tmp_path, 'mixed')
    with open(os.path.join(data, 'index.json')) as handle:
        config = json.load(handle)['config']
    photo = config['data_format'].index('jpeg')
    leaves = len(config['data_format'])
    chunk = os.path.join(data, 'chunk-0-0.bin')
    with open(chunk, 'r+b') as handle:
        raw = bytearray(handle.read())
        (start,) = struct.unpack_from('<I', raw, 4 + 4 * 3)          # item 3
        sizes = struct.unpack_from(f'<{leaves}I', raw, start)
        at = start + 4 * leaves + sum(sizes[:photo])
        raw[at:at + sizes[photo]] = bytes(sizes[photo])
        handle.seek(0)
        handle.write(raw)
    with pytest.raises(ShardCorruptError, match=r'chunk-0-0.bin: item 3: .*cannot identify image'):  # PIL's error
        StreamingDataset(local=data, batch_size=4)[3]
    projected = StreamingDataset(local=data, batch_size=4, columns=['id', 'name', 'image'])
    assert projected[3]['id'] == 3 and list(projected[3]) == ['id', 'name', 'image']


def test_the_builder_records_the_projection(tmp_path: Any) -> None:
    from streaming_litdata import LitdataFormat, LitdataIndexBuilder
    from streaming_litdata.builder import convert_index
    builder = LitdataIndexBuilder().configure({'columns': ['text']})
    assert builder.name == 'litdata[columns=text]' and builder.option_names == ('columns',)
    with pytest.raises(ValueError, match='non-empty list'):
        LitdataIndexBuilder().configure({'columns': 'text'})
    data = os.path.join(GOLDEN, 'rows')
    entry = convert_index(open(os.path.join(data, 'index.json'), 'rb').read(), 'rows', columns=['text'])['shards'][0]
    assert entry['columns'] == ['text']
    with pytest.raises(IndexFormatError, match='not top-level keys'):
        LitdataFormat().reader(dict(entry, columns=['nope']))
    plain = dict(entry)
    del plain['columns']  # an index derived before projections existed still reads
    assert LitdataFormat().reader(plain).columns is None


@pytest.mark.slow
def test_projection_in_two_dataloader_workers(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'mixed-zstd')
    dataset = StreamingDataset(streams=[Stream(remote=data, local=str(tmp_path / 'cache'), columns=['id', 'flag'])],
                               batch_size=4, shuffle=True)
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    items = [item for batch in loader for item in batch]
    assert sorted(item['id'] for item in items) == list(range(40))
    assert all(list(item) == ['id', 'flag'] for item in items)
