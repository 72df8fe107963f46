"""``streaming.base.spanner``: :class:`Spanner`, sample id to ``(shard, index in shard)``."""

from __future__ import annotations

from streaming_core.spanner import Spanner

__all__ = ['Spanner']
