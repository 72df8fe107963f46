"""Builtin plugins, registered through the same path as third-party plugins."""
