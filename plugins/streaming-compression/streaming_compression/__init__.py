"""zstd, lz4, brotli and snappy compression for streaming-core."""
