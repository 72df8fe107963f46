"""``streaming.base.format.index``: the index file's name."""

from __future__ import annotations

from streaming_core.reading.index_file import get_index_basename

__all__ = ['get_index_basename']
