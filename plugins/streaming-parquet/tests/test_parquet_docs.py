"""docs/guide/parquet.md runs: its Python blocks, in order, as one script in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PAGE = os.path.join(ROOT, 'docs', 'guide', 'parquet.md')


def test_the_parquet_guide_runs(tmp_path: Any) -> None:
    with open(PAGE) as handle:
        blocks = re.findall(r'^```python\n(.*?)^```', handle.read(), re.S | re.M)
    assert len(blocks) >= 2
    script = tmp_path / 'page.py'
    script.write_text('\n\n'.join(blocks))
    result = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, f'{result.stdout[-2000:]}\n{result.stderr[-4000:]}'
