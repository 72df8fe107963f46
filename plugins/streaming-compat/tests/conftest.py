"""Shared helpers of the streaming-compat tests: small datasets written through ``import streaming``."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = sys.executable


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: str | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this virtualenv (what a user's script is)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([PYTHON, '-c', code], capture_output=True, text=True, env=full_env, cwd=cwd or ROOT,
                          timeout=timeout)


@pytest.fixture
def python() -> Any:
    """:func:`run_python`, for tests."""
    return run_python


@pytest.fixture
def int_dataset(tmp_path: Any) -> str:
    """A local MDS dataset of 40 samples ``{'id': i, 'text': str(i)}`` in 4 shards, written by ``streaming``."""
    from streaming import MDSWriter
    out = str(tmp_path / 'ints')
    with MDSWriter(out=out, columns={'id': 'int', 'text': 'str'}, size_limit=300) as writer:
        for i in range(40):
            writer.write({'id': i, 'text': str(i)})
    return out
