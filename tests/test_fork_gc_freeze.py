"""Forked workers inherit the parent's objects frozen (issue 15): no full collection in a new worker walks, and so
copies, every page of the parent's objects; the parent collects as before, and a program's own freeze is left alone.

Each case forks from a fresh interpreter (so the handlers are those of ``streaming_core`` alone).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CODE = '''
import gc, json, os, sys
import streaming_core.machinery.host  # installs the fork handlers
from streaming_core.machinery import forking
junk = [[i] for i in range(50_000)]
if sys.argv[1] == 'user':
    gc.freeze()
user = gc.get_freeze_count()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, str(gc.get_freeze_count()).encode())
    os._exit(0)
os.waitpid(pid, 0)
child = int(os.read(read, 64))
print(json.dumps({'installed': forking.installed(), 'user': user, 'child': child, 'parent': gc.get_freeze_count()}))
'''


def _run(mode: str, **env: str) -> dict:
    environ = {**os.environ, 'PYTHONPATH': ROOT, **env}
    result = subprocess.run([sys.executable, '-c', _CODE, mode], capture_output=True, text=True, env=environ,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_forked_child_inherits_the_objects_frozen_and_the_parent_unfreezes():
    report = _run('plain')
    assert report['installed'] and report['user'] == 0
    assert report['child'] > 50_000, 'the inherited objects are in the permanent generation of the child'
    assert report['parent'] == 0, 'the parent collects its objects as before'


def test_a_programs_own_freeze_is_left_alone_and_the_switch_disables_it():
    user = _run('user')
    assert user['user'] > 50_000 and user['parent'] == user['user'] and user['child'] > 50_000
    off = _run('plain', STREAMING_CORE_GC_FREEZE_AT_FORK='0')
    assert off['child'] == 0 and off['parent'] == 0
