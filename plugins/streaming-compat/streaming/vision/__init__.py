"""``streaming.vision``: the reference's vision datasets over the ``streaming-datasets`` recipes.

Samples are ``(image, label)`` / ``(image, annotations)`` / ``(image, mask)`` as in the reference, with
``transform``, ``target_transform`` and ``transforms``; the datasets are the ones ``streaming convert cifar10``
(``imagenet``, ``coco``, ``ade20k``) writes, the same column layout as the reference's converters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming._recipes import REFERENCE_ORDER_DEFAULTS, compat_recipe
from streaming.vision.base import StandardTransform
from streaming_datasets import vision as _vision

__all__ = ['StreamingADE20K', 'StreamingCIFAR10', 'StreamingCOCO', 'StreamingImageNet']


def _classification(name: str, recipe: type, doc: str) -> type:
    """``recipe`` with the reference's ``StreamingVisionDataset`` arguments: without ``transform`` the image becomes a
    tensor (:class:`~streaming.vision.base.StandardTransform`, so the default ``DataLoader`` collates it), and
    ``transforms`` with ``transform`` / ``target_transform`` is refused."""
    base = compat_recipe(name, recipe, REFERENCE_ORDER_DEFAULTS, doc)

    def __init__(self: Any, *, transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
                 transform: Callable[[Any], Any] | None = None, target_transform: Callable[[Any], Any] | None = None,
                 **kwargs: Any) -> None:
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError('Only transforms or transform/target_transform can be passed as an argument')
        base.__init__(self, transforms=transforms or StandardTransform(transform, target_transform), **kwargs)
        self.transform, self.target_transform = transform, target_transform  # as the reference keeps them

    def _apply(self: Any, x: Any, y: Any) -> tuple[Any, Any]:
        return self.transforms(x, y)  # transform and target_transform are inside it, as in the reference

    return type(name, (base,), {'__init__': __init__, '_apply': _apply, '__doc__': doc,
                                '__module__': 'streaming.vision'})


def _segmentation(name: str, recipe: type, doc: str) -> type:
    """``recipe`` with the reference's ``joint_transform``: a callable of the ``(image, mask)`` tuple, applied before
    ``transform`` and ``target_transform``."""
    base = compat_recipe(name, recipe, REFERENCE_ORDER_DEFAULTS, doc)

    def __init__(self: Any, *, joint_transform: Callable[[tuple[Any, Any]], tuple[Any, Any]] | None = None,
                 **kwargs: Any) -> None:
        base.__init__(self, **kwargs)
        self.joint_transform = joint_transform

    def _apply(self: Any, x: Any, y: Any) -> tuple[Any, Any]:
        if self.joint_transform is not None:
            x, y = self.joint_transform((x, y))
        return base._apply(self, x, y)

    return type(name, (base,), {'__init__': __init__, '_apply': _apply, '__doc__': doc,
                                '__module__': 'streaming.vision'})


StreamingCIFAR10 = _classification('StreamingCIFAR10', _vision.StreamingCIFAR10,
                                   'CIFAR-10: ``(image, label)`` samples, the image a tensor without ``transform``.')
StreamingImageNet = _classification('StreamingImageNet', _vision.StreamingImageNet,
                                    'ImageNet: ``(image, label)`` samples, the image a tensor without ``transform``.')
StreamingCOCO = compat_recipe('StreamingCOCO', _vision.StreamingCOCO, REFERENCE_ORDER_DEFAULTS,
                              'COCO: ``(image, annotations)`` samples.')
StreamingADE20K = _segmentation('StreamingADE20K', _vision.StreamingADE20K,
                                'ADE20K: ``(image, mask)`` samples; ``joint_transform`` takes the pair as one tuple.')
