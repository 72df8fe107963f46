"""Datasets written by litdata 0.2.76's ``optimize`` (golden files made by ``golden/make_golden.py`` in a side
virtualenv) read item for item as litdata itself reads them; the chunks stream through the runtime; features we do
not read are refused by name and damaged chunks are ShardCorruptErrors."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import IndexFormatError, ShardCorruptError
from streaming_core.reading.index_file import index_text

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
if GOLDEN not in sys.path:
    sys.path.insert(0, GOLDEN)


def _ours(name: str) -> list[Any]:
    import tempfile

    from streaming_litdata import LitdataFormat, convert_index
    from streaming_litdata.convert import local_chunk
    from streaming_litdata.sizes import local_reader
    root = os.path.join(GOLDEN, name)
    index = convert_index(open(os.path.join(root, 'index.json'), 'rb').read(), f'{root}/index.json',
                          local_reader(root))
    items = []
    with tempfile.TemporaryDirectory() as scratch:  # whole-file zstd chunks are decompressed here
        for entry in index['shards']:
            reader = LitdataFormat().reader(entry, where=name)
            with reader.open([local_chunk(root, entry, scratch)]) as view:
                items += [view[i] for i in range(len(view))]
    return items


@pytest.mark.parametrize('name', ['mixed', 'rows', 'arrow', 'mixed-zstd', 'mixed-zstd-sample', 'mixed-zstd-chunk',
                                  'arrow-zstd'])
def test_every_item_equals_litdatas_reading(name: str) -> None:
    from make_golden import canonical
    expected = pickle.load(open(os.path.join(GOLDEN, f'{name}-expected.pkl'), 'rb'))
    ours = _ours(name)
    assert len(ours) == len(expected) == 40
    for i, (mine, theirs) in enumerate(zip(ours, expected)):
        assert canonical(mine) == theirs, f'{name} item {i}'


def test_values_have_the_types_litdata_returns() -> None:
    import numpy as np
    import torch
    from make_golden import mixed
    item = _ours('mixed')[7]
    assert item['id'] == 7 and item['score'] == 7 / 3 and item['flag'] is False and item['name'] == 'item 7 \u00e9'
    assert item['blob'] == mixed(7)['blob']
    assert isinstance(item['vec'], np.ndarray) and item['vec'].dtype == np.float32
    assert item['mat'].shape == (2, 3) and item['mat'][1, 2] == 35
    assert isinstance(item['tvec'], torch.Tensor) and item['tvec'].tolist() == [0, 7, 14, 21]
    assert item['tmat'].shape == (2, 2) and item['tmat'].dtype == torch.float32
    assert item['image'].size == (4, 5) and item['image'].mode == 'RGB'
    assert item['nested'] == {'tags': ['t7', 'u7'], 'pair': (7, 8), 'meta': {'k': 7, 'name': 'n7'}}
    assert item['scores'] == [7.0, 3.5]


def _as_streaming_dataset(tmp_path: Any, name: str) -> str:
    """The golden chunks beside the index convert_index makes (what the derived index will hold)."""
    from streaming_litdata import convert_index
    out = str(tmp_path / name)
    shutil.copytree(os.path.join(GOLDEN, name), out)
    index = convert_index(open(os.path.join(out, 'index.json'), 'rb').read(), name)
    with open(os.path.join(out, 'index.json'), 'w') as handle:
        handle.write(index_text(index['shards']))
    return out


def test_chunks_stream_through_the_runtime_shuffled_and_resumed(tmp_path: Any) -> None:
    data = _as_streaming_dataset(tmp_path, 'rows')
    args = dict(local=data, batch_size=4, shuffle=True, num_canonical_nodes=1, shuffle_block_size=32)
    full = [s['id'] for s in StreamingDataset(**args)]
    assert sorted(full) == list(range(40)) and full != list(range(40))
    dataset = StreamingDataset(**args)
    seen = []
    for item in dataset:
        if len(seen) == 13:
            break
        seen.append(item['id'])
    resumed = StreamingDataset(**args)
    resumed.load_state_dict(dataset.state_dict(13, True))
    assert seen + [s['id'] for s in resumed] == full
    assert StreamingDataset(local=data, batch_size=1)[17] == {'id': 17, 'text': 'row 17', 'labels': [17, 18, 19]}


def test_a_chunk_shorter_than_its_index_says_is_corrupt(tmp_path: Any) -> None:
    from streaming_litdata import LitdataFormat, convert_index
    root = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), root)
    entry = convert_index(open(os.path.join(root, 'index.json'), 'rb').read(), 'mixed')['shards'][0]
    path = os.path.join(root, entry['raw_data']['basename'])
    with open(path, 'r+b') as handle:
        handle.truncate(200)
    with pytest.raises(ShardCorruptError, match=r'chunk-0-0\.bin: the file has 200 bytes but the index declares'):
        LitdataFormat().reader(entry, where='mixed').open([path])
    entry['raw_data']['bytes'] = 200  # an index that agrees with the short file: the offsets give it away
    with pytest.raises(ShardCorruptError, match=r'item offsets are inconsistent with a 200-byte chunk'):
        LitdataFormat().reader(entry, where='mixed').open([path])


@pytest.mark.parametrize('change, message', [
    ({'encryption': {'level': 'sample'}}, r'the dataset is encrypted \(litdata encryption\)'),
    ({'compression': 'zstd', 'compression_level': 'frame'}, r"compression_level='frame', which litdata 0.2.76 "
                                                             r"does not write"),
    ({'compression': 'lz4'}, r"compression='lz4'; streaming-litdata reads only zstd chunks"),
    ({'ipc_compression': 'zstd'}, r"ipc_compression='zstd' \(compressed Arrow row footers\)"),
    ({'item_loader': 'TokensLoader'}, r"litdata's TokensLoader; only the default PyTreeLoader"),
])
def test_unsupported_features_are_refused_by_name(change: dict[str, Any], message: str) -> None:
    from streaming_litdata import convert_index
    obj = json.loads(open(os.path.join(GOLDEN, 'rows', 'index.json')).read())
    obj['config'].update(change)
    with pytest.raises(IndexFormatError, match=message):
        convert_index(json.dumps(obj).encode(), 'rows/index.json')


def test_compressed_golden_chunks_are_compressed() -> None:
    """The golden datasets really use litdata's two in-file zstd layouts (not chunks litdata left uncompressed)."""
    from streaming_litdata.framed import MAGIC
    for name, level in (('mixed-zstd', 'batch'), ('mixed-zstd-sample', 'sample')):
        config = json.loads(open(os.path.join(GOLDEN, name, 'index.json')).read())['config']
        assert (config['compression'], config['compression_level']) == ('zstd', level)
    head = open(os.path.join(GOLDEN, 'mixed-zstd', 'chunk-0-0.bin'), 'rb').read(8)
    assert head == MAGIC
    assert os.path.getsize(os.path.join(GOLDEN, 'mixed-zstd', 'chunk-0-0.bin')) < \
        os.path.getsize(os.path.join(GOLDEN, 'mixed', 'chunk-0-0.bin')) // 2


@pytest.mark.parametrize('name, cut, message', [
    ('mixed-zstd', 100, r'cannot hold the offsets and frame table'),
    ('mixed-zstd', 3000, r'frame 0 runs to byte \d+ of a 3000-byte chunk'),
    ('mixed-zstd-sample', 200, r'item offsets are inconsistent with a 200-byte chunk'),
])
def test_a_compressed_chunk_shorter_than_its_index_says_is_corrupt(tmp_path: Any, name: str, cut: int,
                                                                   message: str) -> None:
    from streaming_litdata import LitdataFormat, convert_index
    root = str(tmp_path / name)
    shutil.copytree(os.path.join(GOLDEN, name), root)
    entry = convert_index(open(os.path.join(root, 'index.json'), 'rb').read(), name)['shards'][0]
    path = os.path.join(root, entry['raw_data']['basename'])
    with open(path, 'r+b') as handle:
        handle.truncate(cut)
    entry['raw_data']['bytes'] = cut  # an index that agrees with the short file: the chunk's own tables catch it
    with pytest.raises(ShardCorruptError, match=message):
        LitdataFormat().reader(entry, where=name).open([path])


def test_a_damaged_zstd_frame_is_corrupt(tmp_path: Any) -> None:
    from streaming_litdata import LitdataFormat, convert_index
    root = str(tmp_path / 'mixed-zstd')
    shutil.copytree(os.path.join(GOLDEN, 'mixed-zstd'), root)
    entry = convert_index(open(os.path.join(root, 'index.json'), 'rb').read(), 'mixed-zstd')['shards'][0]
    path = os.path.join(root, entry['raw_data']['basename'])
    data = bytearray(open(path, 'rb').read())
    data[-400:-300] = bytes(100)
    open(path, 'wb').write(bytes(data))
    with LitdataFormat().reader(entry, where='mixed-zstd').open([path]) as view:
        with pytest.raises(ShardCorruptError, match=r'chunk-0-0\.bin: zstd frame 0'):
            view[0]


def test_an_unknown_data_format_is_refused_by_name() -> None:
    from streaming_litdata import LitdataFormat, convert_index
    obj = json.loads(open(os.path.join(GOLDEN, 'rows', 'index.json')).read())
    obj['config']['data_format'] = ['int', 'video', 'json']
    entry = convert_index(json.dumps(obj).encode(), 'rows/index.json')['shards'][0]
    with pytest.raises(IndexFormatError, match=r"the litdata data format 'video' is not supported"):
        LitdataFormat().reader(entry, where='rows')


def test_the_builder_converts_litdatas_index(tmp_path: Any) -> None:
    from streaming_core.reading.derived_index import SourceFile
    from streaming_litdata import LitdataIndexBuilder
    root = os.path.join(GOLDEN, 'mixed')
    size = os.path.getsize(os.path.join(root, 'index.json'))

    def read(name: str, start: int, length: int) -> bytes:
        with open(os.path.join(root, name), 'rb') as handle:
            handle.seek(start)
            return handle.read(length)
    index = LitdataIndexBuilder().build([SourceFile('index.json', size)], read, where=root)
    assert [e['samples'] for e in index['shards']] == [16, 16, 8]
    assert index['shards'][0]['data_format'][:4] == ['int', 'float', 'bool', 'str']


def test_convert_litdata_to_mds_keeps_every_item(tmp_path: Any) -> None:
    import numpy as np

    from streaming_core.cli import main
    out = str(tmp_path / 'mds')
    assert main(['convert', 'litdata', os.path.join(GOLDEN, 'mixed'), out, '--quiet']) == 0
    index = json.loads(open(os.path.join(out, 'index.json')).read())
    shard = index['shards'][0]
    assert dict(zip(shard['column_names'], shard['column_encodings'])) == {
        'blob': 'bytes', 'flag': 'int', 'id': 'int', 'image': 'pil', 'mat': 'ndarray', 'name': 'str',
        'nested': 'json', 'photo': 'jpeg', 'score': 'float64', 'scores': 'json', 'tmat': 'ndarray', 'tvec': 'ndarray',
        'vec': 'ndarray'}
    converted = StreamingDataset(local=out, batch_size=1)
    source = _ours('mixed')
    assert len(converted) == len(source) == 40
    for got, want in zip(converted, source):
        assert (got['id'], got['score'], got['flag'], got['name'], got['blob']) == (
            want['id'], want['score'], int(want['flag']), want['name'], want['blob'])
        np.testing.assert_array_equal(got['vec'], want['vec'])
        np.testing.assert_array_equal(got['mat'], want['mat'])
        np.testing.assert_array_equal(got['tvec'], want['tvec'].numpy())
        np.testing.assert_array_equal(got['tmat'], want['tmat'].numpy())
        np.testing.assert_array_equal(np.asarray(got['image']), np.asarray(want['image']))
        assert got['photo'].size == want['photo'].size  # a JPEG column (the MDS jpeg encoding re-encodes)
        assert got['nested'] == {'tags': want['nested']['tags'], 'pair': list(want['nested']['pair']),
                                 'meta': want['nested']['meta']}
        assert got['scores'] == want['scores']


@pytest.mark.parametrize('position', [194, 1067, 2134, 6596])
def test_a_damaged_item_is_an_error_naming_its_chunk(tmp_path, position: int) -> None:
    """One flipped byte inside an item of a chunk: reading it raises ``ShardCorruptError`` naming the chunk, through
    ``ds[i]``, iteration and a DataLoader worker (numpy's, struct's, UTF-8's or PIL's own error escaped, naming no
    file)."""
    import shutil

    import torch.utils.data as tud

    from streaming_core import StreamingDataset
    from streaming_core.errors import ShardCorruptError
    root = str(tmp_path / 'mixed')
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), root)
    path = os.path.join(root, 'chunk-0-1.bin')
    data = bytearray(open(path, 'rb').read())
    data[position] ^= 0xFF
    open(path, 'wb').write(bytes(data))
    dataset = StreamingDataset(local=root, batch_size=4)
    with pytest.raises(ShardCorruptError, match='chunk-0-1.bin'):
        [dataset[i] for i in range(len(dataset))]
    with pytest.raises(ShardCorruptError, match='chunk-0-1.bin'):
        list(StreamingDataset(local=root, batch_size=4))
    loader = tud.DataLoader(StreamingDataset(local=root, batch_size=4), batch_size=4, num_workers=1,
                            collate_fn=lambda batch: batch)
    with pytest.raises(ShardCorruptError, match='chunk-0-1.bin'):
        list(loader)
