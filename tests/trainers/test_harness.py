"""The trainer harness reports a hung run with what is needed to diagnose it: the Python stacks of every process and,
where gdb is installed, their native stacks (a hang inside C, such as a fork handler, shows no Python frame)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.trainers import harness

HANG = '''
import os, time
child = os.fork()
time.sleep(120)
'''


def test_a_hung_run_fails_naming_a_report_with_every_process_stacks(tmp_path):
    script = tmp_path / 'hang.py'
    script.write_text(HANG)
    with pytest.raises(AssertionError) as caught:
        harness.run([sys.executable, str(script)], timeout=2, cwd=str(tmp_path))
    message = str(caught.value)
    assert 'hung for 2 s' in message and 'Fatal Python error' in message, message
    report = message.split('full report: ', 1)[1].split(')', 1)[0]
    try:
        with open(report) as source:
            text = source.read()
    finally:
        os.remove(report)
    python, native = text.split('===== native stacks =====', 1)
    assert python.count('Current thread') == 2, python  # faulthandler in the parent and in the forked child
    if shutil.which('gdb') is None:
        assert 'gdb is not installed' in native
        return
    sections = native.split('===== pid ')[1:]
    assert len(sections) == 2, native[-3000:]
    assert all('sleep' in section for section in sections), native[-3000:]


def test_a_hung_rank_of_a_launch_fails_naming_a_report_with_its_stacks(tmp_path, monkeypatch):
    package = tmp_path / 'hangpkg'
    package.mkdir()
    (package / '__init__.py').write_text('')
    (package / 'client.py').write_text(
        'import json, os, sys, time\n'
        'config = json.loads(sys.argv[1])\n'
        'if os.environ["RANK"] == "1":\n'
        '    child = os.fork()\n'
        '    time.sleep(120)\n')
    monkeypatch.setattr(harness, 'ROOT', str(tmp_path))
    monkeypatch.setenv('PYTHONPATH', str(tmp_path))
    with pytest.raises(AssertionError) as caught:
        harness.launch('hangpkg.client', {'run': 'x'}, nproc=2, timeout=2)
    message = str(caught.value)
    assert 'a rank hung for 2 s' in message and '===== rank 1 =====' in message, message
    report = message.split('full report: ', 1)[1].split(')', 1)[0]
    try:
        with open(report) as source:
            text = source.read()
    finally:
        os.remove(report)
    python, native = text.split('===== native stacks =====', 1)
    assert 'client.py", line 5 in <module>' in python, python
    if shutil.which('gdb') is not None:
        sections = native.split('===== pid ')[1:]
        assert len(sections) == 2 and all('sleep' in section for section in sections), native[-3000:]
