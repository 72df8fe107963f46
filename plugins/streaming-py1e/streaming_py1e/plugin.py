"""Hook implementations of streaming-py1e: shuffles."""

from __future__ import annotations
