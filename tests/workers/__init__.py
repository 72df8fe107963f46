"""Scripts run as separate processes by the multi-process tests."""
