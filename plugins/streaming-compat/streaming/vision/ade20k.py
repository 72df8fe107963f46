"""``streaming.vision.ade20k``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.vision import StreamingADE20K

__all__ = ['StreamingADE20K']
