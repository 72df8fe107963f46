"""``streaming.text.pile``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.text import StreamingPile

__all__ = ['StreamingPile']
