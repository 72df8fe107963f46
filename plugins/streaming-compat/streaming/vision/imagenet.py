"""``streaming.vision.imagenet``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.vision import StreamingImageNet

__all__ = ['StreamingImageNet']
