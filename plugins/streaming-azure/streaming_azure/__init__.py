"""Azure Blob Storage and Data Lake storage for streaming-core."""
