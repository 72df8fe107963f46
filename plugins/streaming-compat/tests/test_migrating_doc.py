"""The migration guide's examples run as written: every ``python`` block of docs/migrating.md, in order, in one fresh
process (the way a user would paste them into a script)."""

from __future__ import annotations

import os
import re
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PAGE = os.path.join(ROOT, 'docs', 'migrating.md')
_BLOCK = re.compile(r'^```python\n(.*?)^```', re.S | re.M)


def test_the_guide_runs(tmp_path: Any, python: Any) -> None:
    with open(PAGE) as handle:
        blocks = _BLOCK.findall(handle.read())
    assert len(blocks) >= 2
    result = python('\n\n'.join(blocks), cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]


def test_the_guide_names_every_kept_difference() -> None:
    with open(PAGE) as handle:
        text = handle.read()
    for phrase in ('no named shared memory', 'LOCAL_WORLD_SIZE', '`batch_size` is required',
                   'share one local directory', 'alipan://', 'streaming-hf', 'streaming-databricks', 'streaming-sftp',
                   'pip install -e plugins/streaming-compat', 'instead of', 'cache root'):
        assert phrase in text, phrase
