"""Test dependencies: a missing one fails in CI and skips elsewhere, never silently."""

from __future__ import annotations

import os

import pytest


def require(module: str) -> None:
    """Import ``module`` or fail (in CI) / skip (elsewhere): a missing test dependency is never silent in CI."""
    try:
        __import__(module)
    except ImportError as err:
        if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
            pytest.fail(f'Test dependency {module!r} is missing in CI: {err}')
        pytest.skip(f'{module} is not installed')
