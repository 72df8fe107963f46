"""Google Cloud Storage for streaming-core."""
