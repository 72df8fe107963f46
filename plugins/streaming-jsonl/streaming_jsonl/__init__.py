"""The JSON-lines shard format for streaming-core."""
