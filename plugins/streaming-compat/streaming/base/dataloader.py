"""``streaming.base.dataloader``: :class:`StreamingDataLoader`, streaming-core's loader itself."""

from __future__ import annotations

from streaming_core.dataloader import StreamingDataLoader

__all__ = ['StreamingDataLoader']
