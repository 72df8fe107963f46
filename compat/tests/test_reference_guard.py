"""The guard every reference harness runs: it accepts mosaicml-streaming in .venv-ref and refuses our package."""

from __future__ import annotations

import os
import subprocess

import pytest

from compat.reference_guard import NotTheReferenceError, assert_reference_streaming
from compat.tests.conftest import ROOT

pytestmark = pytest.mark.compat  # the compat suite: its serial pass (Makefile)


def test_reference_venv_passes(ref_python: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PYTHONHOME', 'VIRTUAL_ENV')}
    proc = subprocess.run([ref_python, '-c', 'from compat.reference_guard import assert_reference_streaming; '
                           'print(assert_reference_streaming())'], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(os.path.realpath(os.path.dirname(os.path.dirname(ref_python))))


def test_our_streaming_package_is_refused() -> None:
    streaming = pytest.importorskip('streaming')  # streaming-compat, when installed in this virtualenv
    with pytest.raises(NotTheReferenceError, match='found streaming-compat'):
        assert_reference_streaming(streaming)


def test_a_module_the_distribution_did_not_install_is_refused(tmp_path: object) -> None:
    class Impostor:
        __file__ = os.path.join(str(tmp_path), 'streaming', '__init__.py')
    with pytest.raises(NotTheReferenceError):
        assert_reference_streaming(Impostor)  # type: ignore[arg-type]
