"""``streaming.base.format.json``: the JSON-lines writer and reader (the ``streaming-jsonl`` plugin's)."""

from __future__ import annotations

from streaming_jsonl import JSONWriter
from streaming_jsonl.reader import JSONReader

__all__ = ['JSONReader', 'JSONWriter']
