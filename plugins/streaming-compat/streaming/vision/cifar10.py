"""``streaming.vision.cifar10``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming.vision import StreamingCIFAR10

__all__ = ['StreamingCIFAR10']
