"""The base class of the recipe datasets: a :class:`StreamingDataset` whose samples are the dataset's natural ones.

A subclass implements :meth:`RecipeDataset.to_sample`, turning the stored columns (a dict) into the natural sample
(``(image, label)``, ``(image, target)``, a text record...). Integer indexing, slices, lists and iteration all go
through it, since the core calls an overridden ``__getitem__`` for every sample it iterates. The stored dict
stays available through :meth:`~streaming_core.reading.dataset.StreamingDataset.get_item`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streaming_core import StreamingDataset
from streaming_core.plugin_api import StreamingError, getitem

__all__ = ['RecipeDataset', 'MissingColumnsError', 'check_columns', 'rgb']


class MissingColumnsError(StreamingError, KeyError):
    """The stored samples lack a column the recipe class reads (the dataset was written by another converter)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ''


class RecipeDataset(StreamingDataset):
    """A :class:`StreamingDataset` returning natural samples, with optional ``transform``/``target_transform``.

    Args:
        remote: Where the converted dataset lives (a URL or a directory), or None to read ``local`` in place.
        local: The local cache directory (or the dataset directory when ``remote`` is None).
        split: The split subdirectory (``'train'``, ``'val'``...).
        transform: Applied to the input (the image, the video, the text record...).
        target_transform: Applied to the target (the label, the mask, the caption...) of pair samples.
        transforms: Applied to ``(input, target)`` together, after the two above, returning the new pair (for
            joint augmentations of an image and its mask or boxes); pair samples only.
        **kwargs: Every other :class:`StreamingDataset` argument (``shuffle``, ``batch_size``, ``streams``...).
    """

    #: Columns the stored samples must have (checked on the first sample read).
    required_columns: tuple[str, ...] = ()
    #: Whether samples are ``(input, target)`` pairs (``target_transform`` and ``transforms`` apply).
    pair: bool = True

    def __init__(self, *, remote: str | None = None, local: str | None = None, split: str | None = None,
                 transform: Callable[[Any], Any] | None = None,
                 target_transform: Callable[[Any], Any] | None = None,
                 transforms: Callable[[Any, Any], tuple[Any, Any]] | None = None, **kwargs: Any) -> None:
        name = type(self).__name__
        for arg, value in (('transform', transform), ('target_transform', target_transform),
                           ('transforms', transforms)):
            if value is not None and not callable(value):
                raise TypeError(f'{name}: {arg} must be callable, got {type(value).__name__}.')
        if not self.pair and (target_transform is not None or transforms is not None):
            raise TypeError(f'{name} samples are single records, not (input, target) pairs: pass `transform` only.')
        super().__init__(remote=remote, local=local, split=split, **kwargs)
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = transforms
        self._columns_checked = False

    def to_sample(self, raw: Mapping[str, Any]) -> Any:
        """The natural sample made from the stored columns (override)."""
        raise NotImplementedError

    def __getitem__(self, at: Any) -> Any:
        """The natural sample for an int (negative counts from the end); a list of them for a slice or a list."""
        if isinstance(at, (numbers.Integral, np.integer)):
            # The stored dict straight from get_item: the core's own per-sample `transform` must not see it, since
            # a recipe's `transform` applies to the input of the natural sample (the image, the text record...).
            raw = getitem(at, self.num_samples, self.get_item)
            if not self._columns_checked:
                check_columns(type(self).__name__, raw, self.required_columns)
                self._columns_checked = True
            return self.to_sample(raw)
        return StreamingDataset.__getitem__(self, at)

    def _apply(self, x: Any, y: Any) -> tuple[Any, Any]:
        """The pair after ``transform``, ``target_transform`` and ``transforms``."""
        if self.transform is not None:
            x = self.transform(x)
        if self.target_transform is not None:
            y = self.target_transform(y)
        if self.transforms is not None:
            x, y = self.transforms(x, y)
        return x, y


def check_columns(owner: str, raw: Mapping[str, Any], required: tuple[str, ...]) -> None:
    """Raise a clear error when a stored sample lacks the columns a recipe class reads."""
    missing = [name for name in required if name not in raw]
    if missing:
        raise MissingColumnsError(f'{owner} reads columns {list(required)}, but the stored samples have '
                                  f'{sorted(raw)} (missing {missing}). Point it at a dataset written by the '
                                  f'matching streaming-datasets converter.')


def rgb(image: Any) -> Any:
    """The image in RGB mode (torchvision's loaders do the same for grayscale and CMYK files)."""
    return image if image.mode == 'RGB' else image.convert('RGB')
