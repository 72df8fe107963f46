"""Writing: the format-independent writer, merging partition indexes, compression and hashing."""
