from __future__ import annotations

import os
import pickle

import pytest

from streaming_core.errors import DirectoryNotEmptyError
from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import StreamingCIFAR10, WriterOptions, convert_cifar10
from streaming_datasets.cifar10 import register
from streaming_datasets.conversion import SourceLayoutError

OPTIONS = WriterOptions(size_limit=1 << 13, progress=False)  # about two images per shard


def _key(sample):
    image, label = sample
    return image.tobytes(), label


def test_convert_and_stream_every_sample_once(cifar_source, tmp_path):
    source, expected = cifar_source
    out = str(tmp_path / 'out')
    results = convert_cifar10(source, out, options=OPTIONS)
    assert {split: r.samples for split, r in results.items()} == {'train': 30, 'val': 8}
    for split in ('train', 'val'):
        dataset = StreamingCIFAR10(local=out, split=split, shuffle=True, batch_size=4, shuffle_seed=5)
        assert dataset.num_shards > 2
        got = list(dataset)
        assert all(image.size == (32, 32) and image.mode == 'RGB' for image, _ in got)
        want = [(pixels, label) for pixels, label, _ in expected[split]]
        assert sorted(map(_key, got)) == sorted(want)
        if split == 'train':
            assert list(map(_key, got)) != want  # shuffled
    # The stored columns keep the source order, index and file name.
    stored = LocalDataset(out, split='train')
    assert [stored[i]['i'] for i in range(len(stored))] == list(range(30))
    assert [stored[i]['filename'] for i in range(len(stored))] == [f for _, _, f in expected['train']]
    assert stored[7]['x'].tobytes() == expected['train'][7][0]


def test_transforms_and_random_access(cifar_source, tmp_path):
    source, expected = cifar_source
    out = str(tmp_path / 'out')
    convert_cifar10(source, out, splits=['val'], options=OPTIONS)
    assert not os.path.exists(os.path.join(out, 'train'))
    dataset = StreamingCIFAR10(local=out, split='val', batch_size=1, transform=lambda im: im.size,
                               target_transform=lambda y: StreamingCIFAR10.classes[y])
    assert dataset[3] == ((32, 32), StreamingCIFAR10.classes[expected['val'][3][1]])
    assert dataset[-1] == dataset[7]
    assert [s[1] for s in dataset[2:4]] == [StreamingCIFAR10.classes[expected['val'][k][1]] for k in (2, 3)]
    raw = dataset.get_item(0)
    assert set(raw) == {'i', 'x', 'y', 'filename'}


def test_parallel_conversion_keeps_order(cifar_source, tmp_path):
    source, _ = cifar_source
    one, two = str(tmp_path / 'one'), str(tmp_path / 'two')
    convert_cifar10(source, one, splits=['train'], options=OPTIONS)
    result = convert_cifar10(source, two, splits=['train'], options=WriterOptions(
        workers=3, size_limit=1 << 13, progress=False))['train']
    assert result.partitions == 3 and result.samples == 30
    a, b = LocalDataset(one, split='train'), LocalDataset(two, split='train')
    assert [a[i]['x'].tobytes() for i in range(30)] == [b[i]['x'].tobytes() for i in range(30)]
    assert [b[i]['i'] for i in range(30)] == list(range(30))
    assert sorted(os.listdir(os.path.join(two, 'train')))[:3] == ['00000', '00001', '00002']


def test_cli_register(cifar_source, tmp_path, helpers):
    source, _ = cifar_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(register, ['cifar10', source, out, '--no-progress', '--size-limit', '16kb',
                                      '--splits', 'val', '--compression', 'zstd', '--hashes', 'sha1']) == 0
    assert os.path.isfile(os.path.join(out, 'val', 'index.json'))
    assert len(list(StreamingCIFAR10(local=out, split='val', batch_size=2))) == 8
    with pytest.raises(DirectoryNotEmptyError, match='exist-ok'):
        helpers.run_cli(register, ['cifar10', source, out, '--no-progress', '--splits', 'val'])
    assert helpers.run_cli(register, ['cifar10', source, out, '--no-progress', '--splits', 'val', '--exist-ok']) == 0


def test_bad_sources(cifar_source, tmp_path):
    source, _ = cifar_source
    with pytest.raises(SourceLayoutError, match='not a directory'):
        convert_cifar10(str(tmp_path / 'nope'), str(tmp_path / 'o1'), options=OPTIONS)
    with pytest.raises(ValueError, match='Unknown CIFAR-10 split'):
        convert_cifar10(source, str(tmp_path / 'o2'), splits=['test'], options=OPTIONS)
    os.remove(os.path.join(source, 'data_batch_3'))
    with pytest.raises(SourceLayoutError, match='data_batch_3 is missing'):
        convert_cifar10(source, str(tmp_path / 'o3'), options=OPTIONS)
    with open(os.path.join(source, 'data_batch_3'), 'wb') as handle:
        pickle.dump({b'data': [], b'fine_labels': []}, handle)
    with pytest.raises(SourceLayoutError, match='fine_labels'):
        convert_cifar10(source, str(tmp_path / 'o4'), options=OPTIONS)


class _Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


def test_pickles_that_run_code_are_refused(cifar_source, tmp_path):
    source, _ = cifar_source
    with open(os.path.join(source, 'test_batch'), 'wb') as handle:
        pickle.dump({b'data': _Evil(), b'labels': []}, handle)
    with pytest.raises(SourceLayoutError, match='refusing to load'):
        convert_cifar10(source, str(tmp_path / 'out'), splits=['val'], options=OPTIONS)


def _to_tensor(image):
    import numpy as np
    import torch
    return torch.from_numpy(np.asarray(image).copy())


@pytest.mark.parametrize('num_workers', [0, 2])
def test_dataloader_resumption(cifar_source, tmp_path, num_workers):
    from streaming_core import StreamingDataLoader
    source, _ = cifar_source
    out = str(tmp_path / 'out')
    convert_cifar10(source, out, splits=['train'], options=OPTIONS)

    def loader():
        dataset = StreamingCIFAR10(local=out, split='train', transform=_to_tensor, shuffle=True, batch_size=3)
        return StreamingDataLoader(dataset, batch_size=3, num_workers=num_workers)

    def labels_and_sums(batches):
        return [(int(y), int(x.sum())) for images, ys in batches for x, y in zip(images, ys)]

    full = labels_and_sums(loader())
    assert len(full) == 30
    first = loader()
    taken = []
    for batch in first:
        taken.append(batch)
        if len(taken) == 4:
            break
    state = first.state_dict()
    assert state['sample_in_epoch'] == 12
    resumed = loader()
    resumed.load_state_dict(state)
    rest = labels_and_sums(resumed)
    assert labels_and_sums(taken) + rest == full  # every sample once, in the uninterrupted order
