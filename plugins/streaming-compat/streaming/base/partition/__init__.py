"""``streaming.base.partition``: the reference's partition functions, streaming-core's implementations."""

from __future__ import annotations

from streaming_core.ordering.partition import get_partitions, get_partitions_orig, get_partitions_relaxed

__all__ = ['get_partitions', 'get_partitions_orig', 'get_partitions_relaxed']
