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


def _report_of(message: str) -> tuple[str, str]:
    """The Python and the native stacks of the report a hang failure names (the report is removed)."""
    report = message.split('full report: ', 1)[1].split(')', 1)[0]
    try:
        with open(report) as source:
            text = source.read()
    finally:
        os.remove(report)
    python, native = text.split('===== native stacks =====', 1)
    return python, native


def test_a_hung_run_fails_naming_a_report_with_every_process_stacks(tmp_path):
    script = tmp_path / 'hang.py'
    script.write_text(HANG)
    with pytest.raises(AssertionError) as caught:
        harness.run([sys.executable, str(script)], timeout=2, cwd=str(tmp_path))
    message = str(caught.value)
    assert 'hung for 2 s' in message and 'Fatal Python error' in message, message
    python, native = _report_of(message)
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
    python, native = _report_of(message)
    assert 'client.py", line 5 in <module>' in python, python
    if shutil.which('gdb') is not None:
        sections = native.split('===== pid ')[1:]
        assert len(sections) == 2 and all('sleep' in section for section in sections), native[-3000:]


#: gdb's stack of a DataLoader worker stuck in CPython's fork bug gh-112275 (a hang of the Lightning guide's script on
#: Python 3.11.7, lines cut at 110 characters).
FORK_HANG = """===== pid 28087 =====
Thread 1 (Thread 0x7f4d9d49fb80 (LWP 28087) "python"):
#0  __futex_abstimed_wait_common64 (private=<optimized out>, cancel=true, abstime=0x0, op=393, expected=0, fut
#1  __futex_abstimed_wait_common (futex_word=futex_word@entry=0x561d9ce782d0, expected=expected@entry=0, clock
#2  0x00007f4d9cca3f7b in __GI___futex_abstimed_wait_cancelable64 (futex_word=futex_word@entry=0x561d9ce782d0,
#3  0x00007f4d9ccaecff in do_futex_wait (sem=sem@entry=0x561d9ce782d0, abstime=0x0, clockid=0) at ./nptl/sem_w
#4  0x00007f4d9ccaed90 in __new_sem_wait_slow64 (sem=sem@entry=0x561d9ce782d0, abstime=0x0, clockid=0) at ./np
#5  0x00007f4d9ccaedf9 in __new_sem_wait (sem=sem@entry=0x561d9ce782d0) at ./nptl/sem_wait.c:42
#6  0x00007f4d9d0a9370 in PyThread_acquire_lock_timed (lock=0x561d9ce782d0, microseconds=<optimized out>, intr
#7  0x00007f4d9d0a954c in PyThread_acquire_lock (lock=<optimized out>, waitflag=waitflag@entry=1) at Python/th
#8  0x00007f4d9d0972e2 in _PyThreadState_DeleteExcept (runtime=runtime@entry=0x7f4d9d34e540 <_PyRuntime>, tsta
#9  0x00007f4d9d04fc8f in _PyEval_ReInitThreads (tstate=tstate@entry=0x7f4d9d376ef8 <_PyRuntime+166328>) at Py
#10 0x00007f4d9d0cf280 in PyOS_AfterFork_Child () at ./Modules/posixmodule.c:607
#11 0x00007f4d9d0cf45d in os_fork_impl (module=<optimized out>) at ./Modules/posixmodule.c:6872
"""


def test_a_stack_stuck_in_the_cpython_fork_bug_is_told_apart():
    assert harness.known_fork_hang(FORK_HANG)
    # The same child after the fork: waiting on a lock, in Python code, is another hang.
    after = FORK_HANG.replace('_PyThreadState_DeleteExcept', 'lock_PyThread_acquire_lock').replace(
        'PyOS_AfterFork_Child', '_PyEval_EvalFrameDefault')
    assert not harness.known_fork_hang(after)
    assert not harness.known_fork_hang('')
    error = harness.hang_error('x hung for 9 s', FORK_HANG, '/tmp/r.txt', 'stacks')
    assert isinstance(error, harness.KnownForkHang) and 'gh-112275' in str(error)
    assert type(harness.hang_error('x hung for 9 s', after, '/tmp/r.txt', 'stacks')) is AssertionError
