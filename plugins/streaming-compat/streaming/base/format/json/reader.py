"""``streaming.base.format.json.reader``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_jsonl.reader import JSONReader

__all__ = ['JSONReader']
