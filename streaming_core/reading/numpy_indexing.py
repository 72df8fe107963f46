"""NumPy-style indexing over ``get_item(i)``, shared by the streaming and the map-style datasets."""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

__all__ = ['getitem']


def getitem(at: Any, size: int, get_item: Callable[[int], Any], element: Callable[[Any], Any] | None = None) -> Any:
    """Resolve ``at`` like a NumPy index over ``size`` items: an int (negative counts from the end), a slice, or a
    list/tuple/array of such (giving nested lists).

    ``get_item`` fetches one item by its non-negative index; ``element`` (default: recurse here) resolves each member of
    a slice or list, so a subclass's ``__getitem__`` also applies to ``dataset[2:4]``.

    Raises:
        ValueError: for any other index type.
    """
    if type(at) is int or isinstance(at, (numbers.Integral, np.integer)):
        index = int(at)
        if -size <= index < 0:
            index += size
        return get_item(index)
    if element is None:
        def element(item: Any) -> Any:
            return getitem(item, size, get_item)
    if isinstance(at, slice):
        return [element(i) for i in range(*at.indices(size))]
    if isinstance(at, (list, tuple, np.ndarray)):
        return [element(i) for i in at]
    raise ValueError(f'Unsupported argument type passed to __getitem__: {type(at).__name__}.')
