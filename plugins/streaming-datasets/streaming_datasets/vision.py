"""Streaming classes of the vision recipes: CIFAR-10, ImageNet, COCO and ADE20K.

Each returns the sample torchvision's dataset of the same name returns, with the same transform arguments:
``(image, label)`` for the classification sets, ``(image, annotations)`` for COCO, ``(image, mask)`` for ADE20K.
Images are RGB ``PIL.Image`` objects. They read the columns their converters write (and, for CIFAR-10, ImageNet
and ADE20K, the columns of mosaicml-streaming's own converters, ``x`` and ``y``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming_datasets.base import RecipeDataset, rgb
from streaming_datasets.cifar10 import CLASSES

__all__ = ['StreamingCIFAR10', 'StreamingImageNet', 'StreamingCOCO', 'StreamingADE20K']


class StreamingCIFAR10(RecipeDataset):
    """CIFAR-10 (written by ``streaming convert cifar10``): samples are ``(image, label)``.

    ``image`` is a 32x32 RGB ``PIL.Image`` (``transform`` applies to it), ``label`` an int in 0..9 (see
    :attr:`classes`; ``target_transform`` applies to it). Splits: ``train`` (50,000) and ``val`` (10,000).

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('x', 'y')
    #: Class names in label order.
    classes = list(CLASSES)

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(image, label)``."""
        return self._apply(rgb(raw['x']), int(raw['y']))


class StreamingImageNet(RecipeDataset):
    """ImageNet (written by ``streaming convert imagenet``): samples are ``(image, label)``.

    ``image`` is an RGB ``PIL.Image`` decoded from the original JPEG; ``label`` the index of the class's WordNet id
    in the sorted list of training classes (as torchvision's ``ImageFolder``). The stored sample (``get_item``)
    also has ``wnid``.

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('x', 'y')

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(image, label)``."""
        return self._apply(rgb(raw['x']), int(raw['y']))


def coco_annotations(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rebuild the image's annotation dicts, as in ``instances_<split>.json``, from the stored columns."""
    anns = []
    for rest, box, category, segmentation in zip(raw['annotations'], raw['boxes'], raw['category_ids'],
                                                  raw['segmentation'], strict=True):
        ann = dict(rest)
        ann.update(image_id=raw['image_id'], bbox=box, category_id=category)
        if segmentation is not None:
            ann['segmentation'] = segmentation
        anns.append(ann)
    return anns


class StreamingCOCO(RecipeDataset):
    """COCO instances (written by ``streaming convert coco``): samples are ``(image, annotations)``.

    As torchvision's ``CocoDetection``: ``image`` is an RGB ``PIL.Image``, ``annotations`` the list of the image's
    annotation dicts (``id``, ``image_id``, ``bbox`` ``[x, y, w, h]``, ``category_id``, ``segmentation``, ``area``,
    ``iscrowd``), possibly empty. ``transforms(image, annotations)`` suits detection augmentations.

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('image', 'image_id', 'boxes', 'category_ids', 'segmentation', 'annotations')

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(image, annotations)``."""
        return self._apply(rgb(raw['image']), coco_annotations(raw))


class StreamingADE20K(RecipeDataset):
    """ADE20K (written by ``streaming convert ade20k``): samples are ``(image, mask)``.

    ``image`` is an RGB ``PIL.Image``; ``mask`` a mode ``L`` ``PIL.Image`` of class ids (0 = other, 1..150).
    Use ``transforms(image, mask)`` for joint augmentations (crops, flips). Splits: ``train`` and ``val``.

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('x', 'y')

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(image, mask)``."""
        return self._apply(rgb(raw['x']), raw['y'])
