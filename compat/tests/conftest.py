"""Fixtures of the compat tests: the reference interpreter, running its scripts, and the order datasets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

REF_PYTHON = os.environ.get('STREAMING_REF_PYTHON') or os.path.join(ROOT, '.venv-ref', 'bin', 'python')
REF_SCRIPTS = os.path.join(ROOT, 'compat', 'ref')
#: Seconds one reference script may take (each runs many cases; the whole ``make compat`` is a few minutes).
REF_TIMEOUT = 420


def _in_ci() -> bool:
    return os.environ.get('CI', '').lower() in ('1', 'true', 'yes')


class RefRunner:
    """Runs ``compat/ref/<script>`` in the reference virtualenv with a JSON request and returns its JSON result."""

    def __init__(self, python: str, workdir: str) -> None:
        self.python = python
        self.workdir = workdir
        self.calls = 0

    def __call__(self, script: str, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``script`` on ``request``; raise with the script's output when it fails."""
        self.calls += 1
        req = os.path.join(self.workdir, f'{self.calls:03d}-{script}.request.json')
        res = os.path.join(self.workdir, f'{self.calls:03d}-{script}.result.json')
        with open(req, 'w') as handle:
            json.dump(request, handle, allow_nan=False)
        env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
        env['PYTHONWARNINGS'] = 'ignore'
        proc = subprocess.run([self.python, os.path.join(REF_SCRIPTS, script), req, res], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=REF_TIMEOUT)
        if proc.returncode != 0 or not os.path.exists(res):
            raise RuntimeError(f'reference script {script} failed (exit {proc.returncode}):\n'
                               f'{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}')
        with open(res) as handle:
            return json.load(handle)


@pytest.fixture(scope='session')
def ref_python() -> str:
    """The reference virtualenv's python (``compat/setup.sh`` builds it)."""
    if not os.path.exists(REF_PYTHON):
        message = f'the reference virtualenv is missing ({REF_PYTHON}); run compat/setup.sh (make compat does)'
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    check = subprocess.run([REF_PYTHON, '-c', 'from compat.reference_guard import assert_reference_streaming; '
                            'print(assert_reference_streaming())'], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=REF_TIMEOUT)
    if check.returncode != 0:
        pytest.fail(f'{REF_PYTHON} does not import mosaicml-streaming 0.13 as `streaming`; the comparisons would '
                    f'not be against the reference:\n{check.stderr[-4000:]}')
    return REF_PYTHON


@pytest.fixture(scope='session')
def run_ref(ref_python: str, tmp_path_factory: pytest.TempPathFactory) -> RefRunner:
    """Call ``run_ref(script, request)`` to run a reference script."""
    return RefRunner(ref_python, str(tmp_path_factory.mktemp('ref-io')))


@pytest.fixture(scope='session')
def order_data(run_ref: RefRunner, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A directory holding the datasets ``A``, ``B``, ``C`` written by the reference (see make_order_data.py)."""
    out = str(tmp_path_factory.mktemp('order-data'))
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    proc = subprocess.run([run_ref.python, os.path.join(REF_SCRIPTS, 'make_order_data.py'), out], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=REF_TIMEOUT)
    if proc.returncode != 0:
        raise RuntimeError(f'make_order_data.py failed:\n{proc.stderr[-8000:]}')
    return out
