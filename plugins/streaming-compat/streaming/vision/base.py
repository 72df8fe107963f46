"""``streaming.vision.base``: the reference's base class for ``{'x', 'y'}`` vision datasets, to subclass.

A sample is stored as the columns ``x`` (the input, such as a PIL image) and ``y`` (the target); ``get_item`` (and
so ``dataset[i]`` and iteration) gives the pair ``(x, y)`` after the transforms, as in the reference, with its
order defaults (``partition_algo='orig'``, ``shuffle_algo='py1s'``, ``shuffle_block_size=1 << 18``). Without a
``transform``, ``x`` becomes a tensor as torchvision's ``to_tensor`` makes it (torchvision's own when installed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming._recipes import REFERENCE_ORDER_DEFAULTS
from streaming.base.dataset import StreamingDataset

__all__ = ['StandardTransform', 'StreamingVisionDataset']


def to_tensor(x: Any) -> Any:
    """A PIL image or an ``(H, W[, C])`` array as a ``(C, H, W)`` tensor, 8-bit values scaled to ``[0, 1]``."""
    try:
        from torchvision.transforms.functional import to_tensor as torchvision_to_tensor
    except ImportError:
        torchvision_to_tensor = None
    if torchvision_to_tensor is not None:
        return torchvision_to_tensor(x)
    import numpy as np
    import torch
    array = np.array(x, copy=True)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.dtype == np.bool_:
        array = array.astype(np.uint8) * 255
    tensor = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))
    return tensor.float().div(255) if tensor.dtype == torch.uint8 else tensor


class StandardTransform:
    """Apply ``transform`` to the input (else :func:`to_tensor`) and ``target_transform`` to the target."""

    def __init__(self, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None) -> None:
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, x: Any, y: Any) -> tuple[Any, Any]:
        """The transformed pair."""
        x = self.transform(x) if self.transform else to_tensor(x)
        if self.target_transform:
            y = self.target_transform(y)
        return x, y


class StreamingVisionDataset(StreamingDataset):
    """A :class:`~streaming.StreamingDataset` of ``{'x', 'y'}`` samples served as transformed ``(x, y)`` pairs.

    Args:
        transforms: A callable of ``(x, y)`` returning the pair; or else
        transform: A callable applied to ``x`` (default: :func:`to_tensor`), and
        target_transform: A callable applied to ``y``.
        **kwargs: Every :class:`~streaming.StreamingDataset` argument.

    Raises:
        ValueError: both ``transforms`` and ``transform`` / ``target_transform`` are given.
    """

    def __init__(self, *, transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
                 transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, **kwargs: Any) -> None:
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError('Only transforms or transform/target_transform can be passed as an argument')
        for key, value in REFERENCE_ORDER_DEFAULTS.items():
            kwargs.setdefault(key, value)
        super().__init__(**kwargs)
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms if transforms is not None else StandardTransform(transform, target_transform)

    def get_item(self, idx: int, retry: int = 7) -> Any:
        """The pair ``(x, y)`` of sample ``idx`` after the transforms."""
        obj = super().get_item(idx, retry)
        return self.transforms(obj['x'], obj['y'])
