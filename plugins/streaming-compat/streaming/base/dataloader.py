"""``streaming.base.dataloader``: :class:`StreamingDataLoader`, streaming-core's loader itself."""

from __future__ import annotations

from streaming_core.reading.dataloader import StreamingDataLoader

__all__ = ['StreamingDataLoader']
