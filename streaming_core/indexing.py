"""NumPy-style indexing over ``get_item(i)``, shared by the streaming and the map-style datasets."""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

__all__ = ['getitem']


def getitem(at: Any, size: int, get_item: Callable[[int], Any]) -> Any:
    """Resolve ``at`` like a NumPy index over ``size`` items: an int (negative counts from the end), a slice, or a
    list/tuple/array of such (giving nested lists).

    Raises:
        ValueError: for any other index type.
    """
    if isinstance(at, (numbers.Integral, np.integer)):
        index = int(at)
        if -size <= index < 0:
            index += size
        return get_item(index)
    if isinstance(at, slice):
        return [get_item(i) for i in range(*at.indices(size))]
    if isinstance(at, (list, tuple, np.ndarray)):
        return [getitem(i, size, get_item) for i in at]
    raise ValueError(f'Unsupported argument type passed to __getitem__: {type(at).__name__}.')
