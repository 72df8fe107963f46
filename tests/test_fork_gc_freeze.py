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


_IMPORTING = '''
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from streaming_core import StreamingDataLoader, StreamingDataset
from streaming_mds import MDSWriter
with open(os.path.join(sys.argv[1], 'slow_module.py'), 'w') as f:  # what a lazily imported module or plugin is
    f.write('import time\\nimport threading\\nSTARTED.set()\\ntime.sleep(1.5)\\nVALUE = 7\\n')
import builtins
builtins.STARTED = started = threading.Event()
local = os.path.join(sys.argv[1], 'data')
with MDSWriter(out=local, columns={'id': 'int'}, size_limit=200) as writer:
    for i in range(16):
        writer.write({'id': i})

class Dataset(StreamingDataset):
    def __iter__(self):
        import slow_module  # the child's first import of a module the other thread was importing at the fork
        for sample in super().__iter__():
            yield {'id': sample['id'] + 0 * slow_module.VALUE}

dataset = Dataset(local=local, batch_size=4)
importer = threading.Thread(target=lambda: __import__('slow_module'))
importer.start()
started.wait()
loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context='fork', timeout=60)
ids = sorted(int(i) for batch in loader for i in batch['id'])
importer.join()
print(json.dumps(ids))
'''


def test_a_fork_while_another_thread_imports_waits_for_the_import_not_a_hang_in_the_worker(tmp_path):
    """One thread imports a module (here one that takes 1.5 s) while another forks DataLoader workers that import
    it too: the module's lock, held at the fork, stayed held in each worker, whose import then blocked for ever (a
    review saw 7 of 8 runs of two threads iterating mixed datasets hang). The fork now waits for the import."""
    code, out, err = _bounded(_IMPORTING, str(tmp_path), 240)
    assert code == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == list(range(16))


_SUBMITTING = '''
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import streaming_core.machinery.host  # installs the fork handlers
with open(os.path.join(sys.argv[1], 'submitting_module.py'), 'w') as f:  # an import that runs work on an executor
    f.write('import time\\nfrom concurrent.futures import ThreadPoolExecutor\\ntime.sleep(0.2)\\n'
            'with ThreadPoolExecutor(1) as pool:\\n    VALUE = pool.submit(lambda: 7).result()\\n')
importer = threading.Thread(target=lambda: __import__('submitting_module'))
importer.start()
time.sleep(0.05)  # inside the import
start = time.monotonic()
pid = os.fork()
if pid == 0:
    import submitting_module
    os._exit(0 if submitting_module.VALUE == 7 else 1)
took = time.monotonic() - start
_, status = os.waitpid(pid, 0)
importer.join()
print(json.dumps({'fork_s': took, 'child': status}))
'''


def _bounded(code: str, arg: str, timeout: float) -> tuple[int, str, str]:
    """Run ``code`` in a fresh session; on a timeout, kill the whole session (a forked child that hangs too)."""
    import signal
    proc = subprocess.Popen([sys.executable, '-c', code, arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, 'PYTHONPATH': ROOT}, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return -1, out, f'timed out after {timeout} s\n{err}'
    return proc.returncode, out, err


def test_a_fork_waits_for_an_import_that_submits_to_an_executor_no_longer_than_it_takes(tmp_path):
    """``concurrent.futures`` takes its executors' lock in a before-fork handler: had it run before ours, an import
    submitting work would have waited for the fork, and the fork for the import, until our wait gave up (15 s), and
    the child then hung on the import's lock."""
    code, out, err = _bounded(_SUBMITTING, str(tmp_path), 90)
    assert code == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report['child'] == 0 and report['fork_s'] < 5, report
