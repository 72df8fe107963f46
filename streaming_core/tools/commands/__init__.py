"""Subcommands of the ``streaming`` CLI, one module each (``add_parser`` + ``run``)."""
