"""The Lightning page's example runs as a user would run it: its Python blocks as one script, in a fresh process
(Lightning's ``ddp`` starts the second process itself)."""

from __future__ import annotations

import pytest

from tests.deps import require
from tests.test_docs_examples import python_blocks
from tests.trainers import harness

pytestmark = pytest.mark.slow  # real trainers in fresh processes


def test_lightning_page_runs(tmp_path):
    require('lightning')
    script = tmp_path / 'lightning_page.py'
    script.write_text('\n\n'.join(python_blocks('docs/guide/lightning.md')))
    harness.run([harness.sys.executable, str(script)], timeout=300, cwd=str(tmp_path))
    assert (tmp_path / 'lightning-demo' / 'ckpt' / 'step=10.ckpt').exists()
