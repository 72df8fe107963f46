"""``streaming.base.format.json.writer``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_jsonl import JSONWriter

__all__ = ['JSONWriter']
