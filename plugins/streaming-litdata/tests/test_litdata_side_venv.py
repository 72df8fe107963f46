"""Datasets written now by litdata 0.2.76 itself (in the side virtualenv ``make test`` builds with
``compat/setup.sh --bench``), read by streaming-litdata: every item equal to what litdata's own StreamingDataset
returns, for every data type and chunk kind the golden generator writes. In CI a missing side virtualenv is a
failure."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Any

import pytest

from streaming_core import StreamingDataset

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, 'golden')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
SIDE_PYTHON = os.path.join(os.environ.get('STREAMING_REF_VENV', os.path.join(ROOT, '.venv-ref')), 'bin', 'python')
NAMES = 'mixed,rows,arrow,mixed-zstd,mixed-zstd-sample,mixed-zstd-chunk,arrow-zstd'


def _side_python() -> str:
    check = [SIDE_PYTHON, '-c', 'import litdata, zstd, pyarrow; assert litdata.__version__ == "0.2.76"']
    if os.path.exists(SIDE_PYTHON) and subprocess.run(check, capture_output=True).returncode == 0:
        return SIDE_PYTHON
    message = (f'litdata 0.2.76 (with zstd and pyarrow) is not in the side virtualenv {SIDE_PYTHON}: run '
               f'./compat/setup.sh --bench (make test does)')
    if os.environ.get('CI', '').lower() in ('1', 'true', 'yes'):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope='module')
def written(tmp_path_factory: Any) -> str:
    """The generator's datasets, written by litdata in the side virtualenv into a fresh directory."""
    python = _side_python()
    out = str(tmp_path_factory.mktemp('litdata-written'))
    env = {k: v for k, v in os.environ.items() if not k.startswith('PYTHON')}
    result = subprocess.run([python, os.path.join(GOLDEN, 'make_golden.py'), '--out', out, '--only', NAMES],
                            capture_output=True, text=True, timeout=600, env=env, cwd=out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize('name', NAMES.split(','))
def test_a_dataset_litdata_writes_now_reads_item_for_item(written: str, name: str) -> None:
    if GOLDEN not in sys.path:
        sys.path.insert(0, GOLDEN)
    from make_golden import canonical
    with open(os.path.join(written, f'{name}-expected.pkl'), 'rb') as handle:
        expected = pickle.load(handle)
    dataset = StreamingDataset(local=os.path.join(written, name), batch_size=4)
    assert len(dataset) == len(expected) > 0
    assert [canonical(item) for item in dataset] == expected
    assert canonical(dataset[len(expected) - 1]) == expected[-1]
