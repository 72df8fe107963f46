"""Oracle Cloud Infrastructure Object Storage for streaming-core."""
