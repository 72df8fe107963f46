"""Stream-aware batching (stratified, per_stream, device_per_stream) for streaming-core."""
