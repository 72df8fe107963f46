"""The CSV, TSV and XSV shard formats for streaming-core."""
