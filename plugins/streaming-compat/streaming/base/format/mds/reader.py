"""``streaming.base.format.mds.reader``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_mds.reader import MDSReader

__all__ = ['MDSReader']
