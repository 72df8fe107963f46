"""``streaming.vision.coco``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.vision import StreamingCOCO

__all__ = ['StreamingCOCO']
