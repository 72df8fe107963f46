"""``streaming.text.c4``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.text import StreamingC4

__all__ = ['StreamingC4']
