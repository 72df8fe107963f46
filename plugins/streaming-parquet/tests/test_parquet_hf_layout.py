"""Hugging Face conventions: ``split=`` finds a split's files as the Hub lays them out, ``data_files=`` globs choose
files, and Hugging Face image columns decode to PIL images on request."""

from __future__ import annotations

import io
import json
import os
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.plugin_api import ShardCorruptError
from streaming_parquet import ParquetStream
from streaming_parquet.selection import FileSelectionError, glob_regex, select_names


def _write(path: str, ids: list[int], metadata: dict[bytes, bytes] | None = None) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(os.path.dirname(path), exist_ok=True)
    table = pa.table({'id': ids, 'text': [f'row {i}' for i in ids]})
    pq.write_table(table.replace_schema_metadata(metadata), path, row_group_size=10)


PUSH_TO_HUB = ['README.md', 'data/test-00000-of-00001.parquet', 'data/train-00000-of-00002.parquet',
               'data/train-00001-of-00002.parquet', 'data/validation-00000-of-00001.parquet']
CONVERTED = ['default/partial-train/0000.parquet', 'default/test/0000.parquet', 'default/validation/0000.parquet',
             'other/train/0000.parquet', 'other/train/0001.parquet']
NAMED = ['dev.parquet', 'my_train_file-1.parquet', 'testing.parquet', 'constrain.parquet']


def test_split_layouts_of_the_hub() -> None:
    names = [n for n in PUSH_TO_HUB if n.endswith('.parquet')]
    assert select_names(names, split='train') == ['data/train-00000-of-00002.parquet',
                                                  'data/train-00001-of-00002.parquet']
    assert select_names(names, split='validation') == ['data/validation-00000-of-00001.parquet']
    # Two configurations have a train split: one must be chosen, as `datasets` asks for a config name.
    with pytest.raises(FileSelectionError, match=r"split='train' matches \{config\}/train/ in 2 configurations "
                                                 r"\(default, other\): pass config= one of them"):
        select_names(CONVERTED, split='train')
    assert select_names(CONVERTED, split='train', config='default') == ['default/partial-train/0000.parquet']
    assert select_names(CONVERTED, split='test') == ['default/test/0000.parquet']  # only one config has it
    assert select_names(CONVERTED, split='train', config='other') == ['other/train/0000.parquet',
                                                                     'other/train/0001.parquet']
    assert select_names(CONVERTED, config='default') == CONVERTED[:3]
    pushed_configs = ['data/train-00000-of-00001.parquet', 'fr/train-00000-of-00001.parquet',
                      'fr/test-00000-of-00001.parquet']
    assert select_names(pushed_configs, split='train', config='fr') == ['fr/train-00000-of-00001.parquet']
    assert select_names(pushed_configs, split='train') == ['data/train-00000-of-00001.parquet']
    for configs in (['en/train-00000-of-00001.parquet', 'fr/train-00000-of-00002.parquet',
                     'fr/test-00000-of-00001.parquet'],
                    ['en/data/train-00000-of-00001.parquet', 'fr/data/train-00000-of-00001.parquet']):
        # push_to_hub(config_name=...) without a default configuration: English and French are never mixed
        with pytest.raises(FileSelectionError, match=r"in 2 configurations \(en, fr\): pass config="):
            select_names(configs, split='train')
        assert select_names(configs, split='train', config='en') == [configs[0]]
    assert select_names(['2023/train-00000-of-00001.parquet', 'fr/test-00000-of-00001.parquet'], split='train') == [
        '2023/train-00000-of-00001.parquet']  # one configuration has the split
    assert select_names(['a/train-1.parquet', 'b/train-2.parquet'], split='train') == [
        'a/train-1.parquet', 'b/train-2.parquet']  # not push_to_hub's names: read as the Hub's patterns read them
    assert select_names(['train/a.parquet', 'train/sub/b.parquet', 'test/c.parquet'], split='train') == [
        'train/a.parquet', 'train/sub/b.parquet']
    assert select_names(['x/my-train-set/a.parquet', 'x/test/b.parquet'], split='train') == [
        'x/my-train-set/a.parquet']
    # File names: the split (or a synonym) as a word; "constrain" is not "train".
    assert select_names(NAMED, split='train') == ['my_train_file-1.parquet']
    assert select_names(NAMED, split='validation') == ['dev.parquet']
    assert select_names(NAMED, split='test') == ['testing.parquet']
    with pytest.raises(FileSelectionError, match=r"split='extra' selects none of the 4 Parquet file\(s\)") as err:
        select_names(NAMED, split='extra')
    assert 'data/extra-*.parquet' in str(err.value) and 'data_files=' in str(err.value)


def test_data_files_globs() -> None:
    names = [n for n in PUSH_TO_HUB + CONVERTED if n.endswith('.parquet')]
    assert select_names(names, data_files='data/*.parquet') == names[:4]
    assert select_names(names, data_files=['**/0001.parquet', 'data/test-*']) == [
        'data/test-00000-of-00001.parquet', 'other/train/0001.parquet']
    assert select_names(names, data_files='*/train/*.parquet') == ['other/train/0000.parquet',
                                                                  'other/train/0001.parquet']
    assert select_names(names, split='b', data_files={'a': 'data/*', 'b': 'default/**'}) == CONVERTED[:3]
    assert glob_regex('data/*.parquet').match('data/x/y.parquet') is None  # * stays in one directory
    assert glob_regex('**/*.parquet').match('y.parquet') and glob_regex('[!d]*/x').match('e/x')
    with pytest.raises(FileSelectionError, match="split='c' is not in data_files"):
        select_names(names, split='c', data_files={'a': 'data/*'})
    with pytest.raises(FileSelectionError, match='pass split='):
        select_names(names, data_files={'a': 'data/*'})
    with pytest.raises(FileSelectionError, match=r"data_files=\['nothing/\*'\] match none"):
        select_names(names, data_files='nothing/*')


def test_a_pushed_dataset_streams_by_split(tmp_path: Any) -> None:
    root = str(tmp_path / 'repo')
    for name, ids in zip(PUSH_TO_HUB[1:], ([100, 101], list(range(0, 30)), list(range(30, 50)), [200])):
        _write(os.path.join(root, name), ids)
    with open(os.path.join(root, 'README.md'), 'w') as handle:
        handle.write('---\nconfigs: []\n---\n')
    train = StreamingDataset(streams=[ParquetStream(remote=root, local=str(tmp_path / 'cache'), split='train')],
                             batch_size=4, shuffle=True, shuffle_seed=1)
    assert len(train) == 50 and sorted(s['id'] for s in train) == list(range(50))
    assert train.streams[0].index_identity.startswith('derived:parquet[split=train]:')
    test = StreamingDataset(streams=[ParquetStream(local=root, split='test')], batch_size=2)
    assert [s['id'] for s in test] == [100, 101]
    globbed = StreamingDataset(streams=[ParquetStream(local=root, data_files='data/*-00000-of-*.parquet',
                                                      columns=['id'])], batch_size=2)
    assert sorted(s['id'] for s in globbed) == list(range(30)) + [100, 101, 200]
    with pytest.raises(FileSelectionError, match="split='nope'"):
        StreamingDataset(streams=[ParquetStream(local=root, split='nope')], batch_size=2)


def _png(color: tuple[int, int, int], size: tuple[int, int] = (3, 2)) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.new('RGB', size, color).save(out, format='PNG')
    return out.getvalue()


def _write_images(path: str, with_metadata: bool = True, bad: bool = False) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(os.path.dirname(path), exist_ok=True)
    kind = pa.struct([('bytes', pa.binary()), ('path', pa.string())])
    images = [{'bytes': _png((i * 40, 0, 255 - i * 40)), 'path': f'img{i}.png'} for i in range(4)] + [None]
    if bad:
        images[1] = {'bytes': b'not a png', 'path': 'broken.png'}
    table = pa.table({'image': pa.array(images, kind), 'label': [0, 1, 2, 3, 4]})
    features = {'image': {'_type': 'Image'}, 'label': {'dtype': 'int64', '_type': 'Value'}}
    metadata = {b'huggingface': json.dumps({'info': {'features': features}}).encode()} if with_metadata else None
    pq.write_table(table.replace_schema_metadata(metadata), path)


@pytest.mark.parametrize('with_metadata', [True, False])
def test_image_columns_decode_to_pil_on_request(tmp_path: Any, with_metadata: bool) -> None:
    from PIL import Image
    data = str(tmp_path / 'images')
    _write_images(os.path.join(data, 'data', 'train-00000-of-00001.parquet'), with_metadata)
    plain = StreamingDataset(streams=[ParquetStream(local=data, split='train')], batch_size=1)
    assert plain[1]['image'] == {'bytes': _png((40, 0, 215)), 'path': 'img1.png'}
    decoded = StreamingDataset(streams=[ParquetStream(local=data, split='train', decode_images=True)], batch_size=1)
    samples = list(decoded)
    for i, sample in enumerate(samples[:4]):
        assert isinstance(sample['image'], Image.Image) and sample['image'].size == (3, 2)
        assert sample['image'].getpixel((0, 0)) == (i * 40, 0, 255 - i * 40) and sample['label'] == i
    assert samples[4] == {'image': None, 'label': 4}
    assert decoded[2]['image'].getpixel((2, 1)) == (80, 0, 175)
    labels = StreamingDataset(streams=[ParquetStream(local=data, columns=['label'], decode_images=True)],
                              batch_size=1)
    assert labels[0] == {'label': 0}


def test_an_undecodable_image_names_the_file_and_column(tmp_path: Any) -> None:
    data = str(tmp_path / 'images')
    _write_images(os.path.join(data, 'train.parquet'), bad=True)
    dataset = StreamingDataset(streams=[ParquetStream(local=data, decode_images=True)], batch_size=1)
    assert dataset[0]['label'] == 0
    with pytest.raises(ShardCorruptError, match=r"train\.parquet: image column 'image' holds bytes PIL cannot"):
        dataset[1]
