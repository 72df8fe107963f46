"""Hook implementations of streaming-s3: storage s3."""

from __future__ import annotations
