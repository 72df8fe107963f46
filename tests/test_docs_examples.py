"""The documentation's examples run: every ``python`` block of these pages, in order, in one fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Pages whose Python blocks form one runnable script (they make their own data).
RUNNABLE = ['docs/guide/resumption.md', 'docs/plugins/api.md', 'docs/guide/parquet.md',
            'docs/guide/startup.md', 'docs/guide/webdataset.md', 'docs/storage/hf.md', 'docs/migrating.md']

_BLOCK = re.compile(r'^```python\n(.*?)^```', re.S | re.M)


def python_blocks(page: str) -> list[str]:
    """The ``python`` fenced blocks of a Markdown page, in order."""
    with open(os.path.join(ROOT, page)) as handle:
        return _BLOCK.findall(handle.read())


@pytest.mark.parametrize('page', RUNNABLE)
def test_the_page_runs(page, tmp_path):
    blocks = python_blocks(page)
    assert blocks, f'{page} has no python block'
    script = tmp_path / 'page.py'
    script.write_text('\n\n'.join(blocks))
    result = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, f'{page}:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}'
