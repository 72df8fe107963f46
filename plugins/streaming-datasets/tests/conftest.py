"""Tiny synthetic replicas of each dataset in its real source layout (a few dozen samples), built by the tests."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import pickle
import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest


def random_image(rng: random.Random, size: tuple[int, int], mode: str = 'RGB') -> Any:
    from PIL import Image
    channels = {'RGB': 3, 'L': 1}[mode]
    data = bytes(rng.getrandbits(8) for _ in range(size[0] * size[1] * channels))
    return Image.frombytes(mode, size, data)


def pixels(image: Any) -> bytes:
    """The RGB pixel bytes of an image (or of an image file)."""
    from PIL import Image
    if isinstance(image, (str, bytes)):
        image = Image.open(io.BytesIO(image) if isinstance(image, bytes) else image)
    return image.convert('RGB').tobytes()


def random_text(rng: random.Random, words: int) -> str:
    vocab = ['alpha', 'beta', 'gamma', 'delta', 'naïve', 'café', '数据', 'ström', 'x', '"quoted"', 'a,b', 'emoji🙂']
    return ' '.join(rng.choice(vocab) for _ in range(words))


def run_cli(register: Any, argv: list[str]) -> int:
    """Parse ``argv`` with a parser holding only the subcommand that ``register`` adds, and run it."""
    parser = argparse.ArgumentParser(prog='streaming convert')
    subparsers = parser.add_subparsers(dest='converter', required=True)
    register(subparsers)
    args = parser.parse_args(argv)
    return args.run(args)


# ------------------------------------------------------------------------------------------------------------------
@pytest.fixture
def cifar_source(tmp_path: Any) -> tuple[str, dict[str, list[tuple[bytes, int, str]]]]:
    """``cifar-10-batches-py`` with 5 training batches of 6 images and a test batch of 8; returns the expected
    ``(RGB pixel bytes, label, filename)`` per split, in source order."""
    rng = np.random.default_rng(0)
    root = tmp_path / 'cifar-10-batches-py'
    root.mkdir()
    expected: dict[str, list[tuple[bytes, int, str]]] = {'train': [], 'val': []}
    for name, split, count in [*[(f'data_batch_{i}', 'train', 6) for i in range(1, 6)], ('test_batch', 'val', 8)]:
        data = rng.integers(0, 256, size=(count, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, 10, size=count)]
        filenames = [f'{name}_img_{k}.png'.encode() for k in range(count)]
        batch = {b'batch_label': name.encode(), b'labels': labels, b'data': data, b'filenames': filenames}
        with open(root / name, 'wb') as handle:
            pickle.dump(batch, handle, protocol=2)
        for row, label, filename in zip(data, labels, filenames):
            expected[split].append((row.reshape(3, 32, 32).transpose(1, 2, 0).tobytes(), label, filename.decode()))
    meta = {b'num_cases_per_batch': 6, b'label_names': [n.encode() for n in (
        'airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')], b'num_vis': 3072}
    with open(root / 'batches.meta', 'wb') as handle:
        pickle.dump(meta, handle, protocol=2)
    return str(root), expected


@pytest.fixture
def imagenet_source(tmp_path: Any) -> tuple[str, dict[str, list[tuple[str, int]]]]:
    """``train/<wnid>/*.JPEG`` (3 classes x 4) and ``val/<wnid>/*.JPEG`` (3 x 2); expected ``(path, label)``."""
    rng = random.Random(1)
    root = tmp_path / 'imagenet'
    wnids = ['n01440764', 'n01443537', 'n01484850']
    expected: dict[str, list[tuple[str, int]]] = {'train': [], 'val': []}
    for split, per_class in (('train', 4), ('val', 2)):
        for label, wnid in enumerate(wnids):
            folder = root / split / wnid
            folder.mkdir(parents=True)
            for k in range(per_class):
                name = f'{wnid}_{k}.JPEG' if split == 'train' else f'ILSVRC2012_val_{label * 10 + k:08d}.JPEG'
                path = folder / name
                random_image(rng, (rng.randint(8, 20), rng.randint(8, 20))).save(path, format='JPEG')
                expected[split].append((str(path), label))
    return str(root), expected


@pytest.fixture
def coco_source(tmp_path: Any) -> tuple[str, dict[str, dict[str, Any]]]:
    """``train2017`` (8 images) and ``val2017`` (3) with ``annotations/instances_<split>.json``; returns each
    split's instances dict."""
    rng = random.Random(2)
    root = tmp_path / 'coco'
    (root / 'annotations').mkdir(parents=True)
    categories = [{'id': 1, 'name': 'person', 'supercategory': 'person'},
                  {'id': 18, 'name': 'dog', 'supercategory': 'animal'}]
    instances = {}
    ann_id = 1
    for split, count, first_id in (('train2017', 8, 100), ('val2017', 3, 900)):
        (root / split).mkdir()
        images, anns = [], []
        for n in range(count):
            image_id = first_id + n * 7
            width, height = rng.randint(10, 24), rng.randint(10, 24)
            name = f'{image_id:012d}.jpg'
            mode = 'L' if n == 1 else 'RGB'  # COCO has some grayscale images
            random_image(rng, (width, height), mode).save(root / split / name, format='JPEG')
            images.append({'license': 1, 'file_name': name, 'height': height, 'width': width, 'id': image_id})
            for _ in range(0 if n == 2 else rng.randint(1, 3)):
                box = [round(rng.uniform(0, 5), 2), round(rng.uniform(0, 5), 2), round(rng.uniform(1, 5), 2),
                       round(rng.uniform(1, 5), 2)]
                crowd = rng.random() < 0.25
                segmentation: Any = {'counts': [3, 4, 5], 'size': [height, width]} if crowd else \
                    [[round(rng.uniform(0, 9), 2) for _ in range(6)]]
                anns.append({'segmentation': segmentation, 'area': round(box[2] * box[3], 3), 'iscrowd': int(crowd),
                             'image_id': image_id, 'bbox': box, 'category_id': rng.choice([1, 18]), 'id': ann_id})
                ann_id += 1
        rng.shuffle(anns)  # annotations are not grouped by image in the real files
        instances[split] = {'info': {'year': 2017}, 'licenses': [], 'images': images, 'annotations': anns,
                            'categories': categories}
        with open(root / 'annotations' / f'instances_{split}.json', 'w') as handle:
            json.dump(instances[split], handle)
    return str(root), instances


@pytest.fixture
def ade20k_source(tmp_path: Any) -> tuple[str, dict[str, list[tuple[str, str]]]]:
    """``ADEChallengeData2016`` with 6 training and 3 validation image/mask pairs; expected ``(image, mask)``."""
    rng = random.Random(3)
    root = tmp_path / 'ADEChallengeData2016'
    expected: dict[str, list[tuple[str, str]]] = {'train': [], 'val': []}
    for split, prefix, count in (('training', 'ADE_train', 6), ('validation', 'ADE_val', 3)):
        (root / 'images' / split).mkdir(parents=True)
        (root / 'annotations' / split).mkdir(parents=True)
        for n in range(1, count + 1):
            size = (rng.randint(8, 16), rng.randint(8, 16))
            image, mask = root / 'images' / split / f'{prefix}_{n:08d}.jpg', \
                root / 'annotations' / split / f'{prefix}_{n:08d}.png'
            random_image(rng, size).save(image, format='JPEG')
            from PIL import Image
            Image.frombytes('L', size, bytes(rng.randint(0, 150) for _ in range(size[0] * size[1]))).save(mask)
            expected['train' if split == 'training' else 'val'].append((str(image), str(mask)))
    return str(root), expected


def write_jsonl(path: Any, records: list[dict[str, Any]]) -> None:
    """Write JSON lines, compressed by suffix (``.gz``, ``.zst``)."""
    data = ''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in records).encode('utf-8')
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if path.endswith('.gz'):
        data = gzip.compress(data)
    elif path.endswith('.zst'):
        import zstandard
        data = zstandard.ZstdCompressor().compress(data)
    with open(path, 'wb') as handle:
        handle.write(data)


@pytest.fixture
def c4_source(tmp_path: Any) -> tuple[str, dict[str, list[dict[str, str]]]]:
    """``c4/en`` with two train files (9 + 7 documents) and one validation file (5); expected records by output
    split, in source order."""
    rng = random.Random(4)
    root = tmp_path / 'c4' / 'en'
    expected: dict[str, list[dict[str, str]]] = {'train': [], 'val': []}
    for name, split, count in (('c4-train.00000-of-00002.json.gz', 'train', 9),
                               ('c4-train.00001-of-00002.json.gz', 'train', 7),
                               ('c4-validation.00000-of-00001.json.gz', 'val', 5)):
        records = [{'text': random_text(rng, rng.randint(1, 30)), 'timestamp': f'2019-04-{k + 10}T12:57:54Z',
                    'url': f'https://example.com/{name}/{k}'} for k in range(count)]
        write_jsonl(root / name, records)
        expected[split].extend(records)
    return str(root), expected


@pytest.fixture
def helpers() -> SimpleNamespace:
    """The plain helper functions of this module, for the test modules (which cannot import a conftest)."""
    return SimpleNamespace(pixels=pixels, run_cli=run_cli, write_jsonl=write_jsonl, random_image=random_image,
                           random_text=random_text)
