"""Benchmarks: scripts comparing streaming-core with the reference and peers (not tests)."""
