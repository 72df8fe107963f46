"""Compatibility harness against mosaicml-streaming 0.13 (the reference), run by ``make compat``.

Scripts under ``compat/ref/`` run inside the reference side-virtualenv (``.venv-ref``, built by
``compat/setup.sh``); the tests under ``compat/tests/`` run in our virtualenv and drive those scripts through
subprocesses. :mod:`compat.tagged` is shared by both sides: it turns sample values into exact, comparable JSON.
"""
