"""Old import paths of modules that moved into wings resolve to the very module objects at their new paths."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from streaming_core import _moved

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('old', sorted(_moved.MOVED))
def test_an_old_path_is_the_new_module(old):
    new = _moved.new_path(f'streaming_core.{old}')
    assert importlib.import_module(f'streaming_core.{old}') is importlib.import_module(new)
    assert not os.path.exists(os.path.join(ROOT, 'streaming_core', f'{old}.py')), 'no file is left at the old path'


def test_a_submodule_of_a_moved_package_is_the_same_module():
    import streaming_core.convert.runner as old
    import streaming_core.tools.convert.runner as new
    assert old is new and old.__name__ == 'streaming_core.tools.convert.runner'


def test_monkeypatching_through_an_old_path_patches_the_real_module(monkeypatch):
    import streaming_core.reading.shard_manager as real
    import streaming_core.shards as old
    monkeypatch.setattr('streaming_core.shards.ShardManager', 'patched')
    assert real.ShardManager == 'patched' and old is real


def test_from_imports_through_the_package_work_in_a_fresh_process():
    code = ('from streaming_core import shards, plans, storage\n'
            'import streaming_core.reading.shard_manager as s, streaming_core.ordering.plan_cache as p\n'
            'assert shards is s and plans is p\n'
            'from streaming_core.storage import download_file\n'
            'from streaming_core.storage.facade import download_file as d2\n'
            'assert download_file is d2\n'
            'import streaming_core.util as u, streaming_core.reading.index_file as i\n'
            'assert u.pyjson_sorted is i.pyjson_sorted\n'
            'print("ok")\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.strip() == 'ok', done.stderr


def test_a_name_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module('streaming_core.no_such_module')
    assert _moved.new_path('streaming_core.no_such_module') is None
    assert _moved.new_path('os.path') is None


def test_the_alias_finder_keeps_the_import_light():
    # importlib.abc pulls in importlib.resources (~10 ms); the finder is duck-typed so `import streaming_core` stays
    # cheap (issue 14: no benchmark row slower than before the move).
    code = ('import sys\nimport streaming_core\n'
            'print(sorted(m for m in ("importlib.abc", "importlib.resources") if m in sys.modules))\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.strip() == '[]', done.stdout + done.stderr
