"""``streaming.base.sampling``: :func:`get_sampling`, streaming-core's per-shard sample counts for a stream."""

from __future__ import annotations

from streaming_core.ordering.sampling import get_sampling

__all__ = ['get_sampling']
