"""Hook implementations of streaming-gcs: storage gs."""

from __future__ import annotations
