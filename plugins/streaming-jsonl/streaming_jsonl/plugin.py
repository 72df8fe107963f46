"""Hook implementations of streaming-jsonl: shard format json."""

from __future__ import annotations
