"""``streaming.base.format.mds``: the MDS writer and reader (the ``streaming-mds`` plugin's)."""

from __future__ import annotations

from streaming_mds import MDSWriter
from streaming_mds.reader import MDSReader

__all__ = ['MDSReader', 'MDSWriter']
