"""zstd, lz4, brotli and snappy compression for streaming-core.

Installed, it registers the compression families ``zstd``, ``br``, ``snappy`` and ``lz4``; select one with a
writer's ``compression='zstd:7'``. See :mod:`streaming_compression.codecs` for the formats and levels.
"""

from streaming_compression.codecs import Brotli, Lz4, Snappy, Zstd

__all__ = ['Zstd', 'Brotli', 'Snappy', 'Lz4']
