"""Hook implementations of streaming-stratified: batching methods."""

from __future__ import annotations
