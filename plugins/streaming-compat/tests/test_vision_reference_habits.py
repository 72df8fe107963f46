"""``streaming.vision`` classes take the reference's arguments and give its samples (a review found them returning
PIL images the default collate refuses, and ``joint_transform`` refused)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from streaming import MDSWriter
from streaming.vision import StreamingADE20K, StreamingCIFAR10, StreamingImageNet
from streaming.vision.base import StandardTransform
from torch.utils.data import DataLoader


@pytest.fixture
def pairs(tmp_path):
    out = str(tmp_path / 'pairs')
    with MDSWriter(out=out, columns={'x': 'pil', 'y': 'int'}) as writer:
        for i in range(8):
            writer.write({'x': Image.fromarray(np.full((4, 4, 3), i * 10, dtype=np.uint8)), 'y': i})
    return out


@pytest.mark.parametrize('cls', [StreamingCIFAR10, StreamingImageNet])
def test_without_a_transform_the_image_is_a_tensor_the_default_loader_collates(pairs, cls):
    dataset = cls(local=pairs, batch_size=4)
    assert isinstance(dataset.transforms, StandardTransform)
    x, y = dataset[3]
    assert isinstance(x, torch.Tensor) and x.shape == (3, 4, 4) and float(x[0, 0, 0]) == pytest.approx(30 / 255)
    images, labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert images.shape == (4, 3, 4, 4) and labels.shape == (4,)
    with pytest.raises(ValueError, match='Only transforms or transform/target_transform'):
        cls(local=pairs, batch_size=4, transforms=lambda a, b: (a, b), transform=lambda a: a)


def test_transform_and_target_transform_apply(pairs):
    dataset = StreamingCIFAR10(local=pairs, batch_size=4, transform=lambda im: im.getpixel((0, 0))[0],
                               target_transform=lambda label: label * 100)
    assert dataset[2] == (20, 200)
    swapped = StreamingCIFAR10(local=pairs, batch_size=4, transforms=lambda x, y: (y, x.size))
    assert swapped[1] == (1, (4, 4))


def test_ade20k_joint_transform_takes_the_pair_first(tmp_path):
    out = str(tmp_path / 'ade')
    with MDSWriter(out=out, columns={'x': 'jpeg', 'y': 'png'}) as writer:
        for i in range(4):
            writer.write({'x': Image.fromarray(np.zeros((4, 4, 3), dtype=np.uint8)),
                          'y': Image.fromarray(np.full((4, 4), i, dtype=np.uint8))})
    dataset = StreamingADE20K(local=out, batch_size=2, joint_transform=lambda pair: (pair[1], pair[0]),
                              transform=lambda mask: mask.getpixel((0, 0)))
    x, y = dataset[2]
    assert x == 2 and y.mode == 'RGB'  # swapped first, then ``transform`` applied to the new first element
