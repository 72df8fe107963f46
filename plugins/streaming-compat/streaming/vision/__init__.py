"""``streaming.vision``: the reference's vision datasets over the ``streaming-datasets`` recipes.

Samples are ``(image, label)`` / ``(image, annotations)`` / ``(image, mask)`` as in the reference, with
``transform``, ``target_transform`` and ``transforms``; the datasets are the ones ``streaming convert cifar10``
(``imagenet``, ``coco``, ``ade20k``) writes, the same column layout as the reference's converters.
"""

from __future__ import annotations

from streaming._recipes import REFERENCE_ORDER_DEFAULTS, compat_recipe
from streaming_datasets import vision as _vision

__all__ = ['StreamingADE20K', 'StreamingCIFAR10', 'StreamingCOCO', 'StreamingImageNet']

StreamingCIFAR10 = compat_recipe('StreamingCIFAR10', _vision.StreamingCIFAR10, REFERENCE_ORDER_DEFAULTS,
                                 'CIFAR-10: ``(image, label)`` samples.')
StreamingImageNet = compat_recipe('StreamingImageNet', _vision.StreamingImageNet, REFERENCE_ORDER_DEFAULTS,
                                  'ImageNet: ``(image, label)`` samples.')
StreamingCOCO = compat_recipe('StreamingCOCO', _vision.StreamingCOCO, REFERENCE_ORDER_DEFAULTS,
                              'COCO: ``(image, annotations)`` samples.')
StreamingADE20K = compat_recipe('StreamingADE20K', _vision.StreamingADE20K, REFERENCE_ORDER_DEFAULTS,
                                'ADE20K: ``(image, mask)`` samples.')
