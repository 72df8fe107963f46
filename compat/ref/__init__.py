"""Scripts run by the reference virtualenv's python (see compat/README.md)."""
