"""``streaming.vision.base``: the reference's base class for ``{'x', 'y'}`` vision datasets, to subclass.

A sample is stored as the columns ``x`` (the input, such as a PIL image) and ``y`` (the target); ``dataset[i]`` is
the pair ``(x, y)`` after the transforms, as in the reference. Unlike the reference, torchvision is not needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.base.dataset import StreamingDataset

__all__ = ['StandardTransform', 'StreamingVisionDataset']


class StandardTransform:
    """Apply ``transform`` to the input and ``target_transform`` to the target (either may be ``None``)."""

    def __init__(self, transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None) -> None:
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, x: Any, y: Any) -> tuple[Any, Any]:
        """The transformed pair."""
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        return x, y


class StreamingVisionDataset(StreamingDataset):
    """A :class:`~streaming.StreamingDataset` of ``{'x', 'y'}`` samples served as transformed ``(x, y)`` pairs.

    Args:
        transforms: A callable of ``(x, y)`` returning the pair; or else
        transform: A callable applied to ``x``, and
        target_transform: A callable applied to ``y``.
        **kwargs: Every :class:`~streaming.StreamingDataset` argument.

    Raises:
        ValueError: both ``transforms`` and ``transform`` / ``target_transform`` are given.
    """

    def __init__(self, *, transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None,
                 transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None, **kwargs: Any) -> None:
        if transforms is not None and (transform is not None or target_transform is not None):
            raise ValueError('Only transforms or transform/target_transform can be passed as argument')
        super().__init__(**kwargs)
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms if transforms is not None else StandardTransform(transform, target_transform)

    def __getitem__(self, idx: Any) -> Any:
        """The pair ``(x, y)`` of sample ``idx`` after the transforms."""
        obj = super().__getitem__(idx)
        return self.transforms(obj['x'], obj['y'])
