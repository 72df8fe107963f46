from __future__ import annotations

import json
import os
import shutil

import pytest

from streaming_core.reading.local_dataset import LocalDataset
from streaming_datasets import (
    StreamingADE20K,
    StreamingCOCO,
    StreamingImageNet,
    WriterOptions,
    convert_ade20k,
    convert_coco,
    convert_imagenet,
)
from streaming_datasets import ade20k as ade20k_module
from streaming_datasets import coco as coco_module
from streaming_datasets import imagenet as imagenet_module
from streaming_datasets.base import MissingColumnsError
from streaming_datasets.conversion import SourceLayoutError

OPTIONS = WriterOptions(size_limit=1 << 11, progress=False)  # a few images per shard


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read()


# ImageNet ---------------------------------------------------------------------------------------------------------
def test_imagenet_round_trip(imagenet_source, tmp_path, helpers):
    source, expected = imagenet_source
    out = str(tmp_path / 'out')
    results = convert_imagenet(source, out, options=OPTIONS)
    assert {s: r.samples for s, r in results.items()} == {'train': 12, 'val': 6}
    for split in ('train', 'val'):
        dataset = StreamingImageNet(local=out, split=split, shuffle=True, batch_size=2)
        assert dataset.num_shards > 1
        got = [(image.mode, image.tobytes(), label) for image, label in dataset]
        want = [('RGB', helpers.pixels(path), label) for path, label in expected[split]]
        assert sorted(got) == sorted(want)
    stored = LocalDataset(out, split='train')
    assert [stored[i]['wnid'] for i in (0, 4, 8)] == ['n01440764', 'n01443537', 'n01484850']
    # JPEG files are stored verbatim.
    assert stored[5]['x'].fp.getvalue() == _read(expected['train'][5][0])


def test_imagenet_parallel_cli_and_non_jpeg(imagenet_source, tmp_path, helpers):
    source, expected = imagenet_source
    # ImageNet's train set hides a PNG behind a .JPEG name: it is converted to RGB and saved as JPEG.
    helpers.random_image(__import__('random').Random(9), (9, 9)).convert('RGBA').save(expected['train'][1][0],
                                                                                      format='PNG')
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(imagenet_module.register, ['imagenet', source, out, '--workers', '2', '--no-progress',
                                                      '--splits', 'train']) == 0
    dataset = StreamingImageNet(local=out, split='train', batch_size=1)
    image, label = dataset[1]
    assert image.mode == 'RGB' and image.size == (9, 9) and label == 0
    assert [y for _, y in dataset] == [label for _, label in expected['train']]  # unshuffled: source order


def test_imagenet_layout_errors(imagenet_source, tmp_path):
    source, _ = imagenet_source
    os.makedirs(os.path.join(source, 'val', 'n99999999'))
    with pytest.raises(SourceLayoutError, match='n99999999 is not one of the 3 training classes'):
        convert_imagenet(source, str(tmp_path / 'a'), options=OPTIONS)
    shutil.rmtree(os.path.join(source, 'val'))
    os.makedirs(os.path.join(source, 'val'))
    open(os.path.join(source, 'val', 'ILSVRC2012_val_00000001.JPEG'), 'wb').close()
    with pytest.raises(SourceLayoutError, match='directly.*class folders'):
        convert_imagenet(source, str(tmp_path / 'b'), splits=['val'], options=OPTIONS)
    with open(os.path.join(source, 'train', 'n01440764', 'notes.txt'), 'w') as handle:
        handle.write('x')
    with pytest.raises(SourceLayoutError, match='Unexpected file'):
        convert_imagenet(source, str(tmp_path / 'c'), splits=['train'], options=OPTIONS)


# COCO ---------------------------------------------------------------------------------------------------------------
def _by_image(instances):
    anns = {image['id']: [] for image in instances['images']}
    for ann in instances['annotations']:
        anns[ann['image_id']].append(ann)
    return anns


def test_coco_round_trip(coco_source, tmp_path, helpers):
    source, instances = coco_source
    out = str(tmp_path / 'out')
    results = convert_coco(source, out, options=OPTIONS)
    assert {s: r.samples for s, r in results.items()} == {'train2017': 8, 'val2017': 3}
    for split in ('train2017', 'val2017'):
        anns = _by_image(instances[split])
        files = {image['id']: os.path.join(source, split, image['file_name']) for image in instances[split]['images']}
        dataset = StreamingCOCO(local=out, split=split, shuffle=True, batch_size=2)
        got = [(image.mode, image.tobytes(), json.dumps(target, sort_keys=True)) for image, target in dataset]
        # Every field of every annotation, in file order, and the image's pixels.
        want = [('RGB', helpers.pixels(files[i]), json.dumps(a, sort_keys=True)) for i, a in anns.items()]
        assert sorted(got) == sorted(want)
    stored = LocalDataset(out, split='train2017')
    first = instances['train2017']['images'][0]
    assert (stored[0]['file_name'], stored[0]['width'], stored[0]['height']) == \
        (first['file_name'], first['width'], first['height'])
    assert stored[0]['boxes'] == [a['bbox'] for a in _by_image(instances['train2017'])[first['id']]]


def test_coco_cli_and_errors(coco_source, tmp_path, helpers):
    source, instances = coco_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(coco_module.register, ['coco', source, out, '--splits', 'val2017', '--no-progress']) == 0
    dataset = StreamingCOCO(local=out, split='val2017', batch_size=1, transforms=lambda im, t: (im.size, len(t)))
    assert [dataset[i] for i in range(3)] == [
        ((image['width'], image['height']), len(_by_image(instances['val2017'])[image['id']]))
        for image in instances['val2017']['images']]
    os.remove(os.path.join(source, 'val2017', instances['val2017']['images'][2]['file_name']))
    with pytest.raises(SourceLayoutError, match='is missing'):
        convert_coco(source, str(tmp_path / 'a'), splits=['val2017'], options=OPTIONS)
    broken = dict(instances['val2017'], annotations=[{'image_id': 1, 'bbox': [0, 0, 1, 1], 'category_id': 1}])
    with open(os.path.join(source, 'annotations', 'instances_val2017.json'), 'w') as handle:
        json.dump(broken, handle)
    with pytest.raises(SourceLayoutError, match='image id 1, which is not in "images"'):
        convert_coco(source, str(tmp_path / 'b'), splits=['val2017'], options=OPTIONS)
    with pytest.raises(SourceLayoutError, match='annotations/instances_<split>.json'):
        convert_coco(str(tmp_path), str(tmp_path / 'c'), options=OPTIONS)


# ADE20K -------------------------------------------------------------------------------------------------------------
def test_ade20k_round_trip(ade20k_source, tmp_path, helpers):
    source, expected = ade20k_source
    out = str(tmp_path / 'out')
    results = convert_ade20k(source, out, options=OPTIONS)
    assert {s: r.samples for s, r in results.items()} == {'train': 6, 'val': 3}
    from PIL import Image
    for split in ('train', 'val'):
        dataset = StreamingADE20K(local=out, split=split, shuffle=True, batch_size=3)
        got = sorted((image.tobytes(), mask.mode, mask.tobytes()) for image, mask in dataset)
        want = sorted((helpers.pixels(image), 'L', Image.open(mask).tobytes()) for image, mask in expected[split])
        assert got == want
    assert LocalDataset(out, split='val')[2]['name'] == 'ADE_val_00000003'


def test_ade20k_cli_transforms_and_errors(ade20k_source, tmp_path, helpers):
    source, expected = ade20k_source
    out = str(tmp_path / 'cli')
    assert helpers.run_cli(ade20k_module.register, ['ade20k', source, out, '--splits', 'validation',
                                                    '--no-progress']) == 0
    flip = StreamingADE20K(local=out, split='val', batch_size=1, target_transform=lambda m: m.size,
                           transforms=lambda im, size: (im.size == size, size))
    assert flip[0][0] is True
    with pytest.raises(TypeError, match='transform must be callable'):
        StreamingADE20K(local=out, split='val', transform='flip')
    os.remove(expected['val'][1][1])
    with pytest.raises(SourceLayoutError, match='have no mask'):
        convert_ade20k(source, str(tmp_path / 'a'), splits=['validation'], options=OPTIONS)


def test_reading_another_datasets_columns_is_a_clear_error(ade20k_source, tmp_path):
    source, _ = ade20k_source
    out = str(tmp_path / 'out')
    convert_ade20k(source, out, splits=['validation'], options=OPTIONS)
    with pytest.raises(MissingColumnsError, match=r"missing \['image', 'image_id'"):
        StreamingCOCO(local=out, split='val', batch_size=1)[0]
