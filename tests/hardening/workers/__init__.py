"""Scripts the hardening tests run as separate processes (ranks, writers, a memory-capped shard reader)."""
