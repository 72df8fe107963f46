"""The MDS shard format and its column encodings for streaming-core."""
