"""The fault, load and hostile-input matrix (issue 8): nothing lost, nothing silent, nothing unbounded."""
