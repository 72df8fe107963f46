"""The compat tests: our implementation against the reference, driven through subprocesses."""
