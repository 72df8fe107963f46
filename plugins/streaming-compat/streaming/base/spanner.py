"""``streaming.base.spanner``: :class:`Spanner`, sample id to ``(shard, index in shard)``."""

from __future__ import annotations

from typing import Any

from streaming_core.reading.spanner import Spanner as _CoreSpanner

__all__ = ['Spanner']


class Spanner(_CoreSpanner):
    """The reference's signature ``Spanner(shard_sizes, span_size=1 << 10)``: ``span_size`` is accepted and kept,
    and changes nothing (the lookup is a binary search over cumulative sizes, which needs no spans)."""

    def __init__(self, shard_sizes: Any, span_size: int = 1 << 10) -> None:
        super().__init__(shard_sizes)
        self.span_size = span_size
