"""``streaming.base.array``: :class:`Array`, the base of NumPy-style indexing (``ds[3]``, ``ds[-1]``, ``ds[2:5]``,
``ds[[1, 2]]``, ``ds[np.array(...)]``).

Subclasses provide :attr:`size` and :meth:`get_item`; indexing is streaming-core's own
(:func:`streaming_core.reading.numpy_indexing.getitem`). ``streaming.StreamingDataset`` and ``streaming.LocalDataset``
are ``Array`` subclasses, as in the reference.
"""

from __future__ import annotations

from typing import Any

from streaming_core.reading.numpy_indexing import getitem

__all__ = ['Array']


class Array:
    """NumPy-style indexing over ``size`` items fetched one at a time by :meth:`get_item`."""

    @property
    def size(self) -> int:
        """The number of items."""
        raise NotImplementedError

    def get_item(self, index: int) -> Any:
        """The item at a non-negative ``index``."""
        raise NotImplementedError

    def __getitem__(self, at: Any) -> Any:
        """An int (negative counts from the end), a slice, or a list/array of them (nested lists)."""
        return getitem(at, self.size, self.get_item, self.__getitem__)
