"""S3 and S3-compatible storage (R2, B2, MinIO, CoreWeave) for streaming-core."""
