"""Hook implementations of streaming-compression: compressors zstd, lz4, br, snappy."""

from __future__ import annotations
