"""``streaming.base.format.mds.writer``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_mds import MDSWriter

__all__ = ['MDSWriter']
