"""Hook implementations of streaming-compression: compressors zstd, lz4, br, snappy."""

from __future__ import annotations

from streaming_compression.codecs import Brotli, Lz4, Snappy, Zstd
from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_compressors(registry: RegistryView) -> None:
    """Register ``zstd`` (1-22), ``br`` (0-11), ``snappy`` (no levels) and ``lz4`` (0-16)."""
    registry.add('zstd', Zstd())
    registry.add('br', Brotli())
    registry.add('snappy', Snappy())
    registry.add('lz4', Lz4())
