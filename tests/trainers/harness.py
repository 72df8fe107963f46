"""What every trainer test shares: the dataset, launching a client's run, reading its sample log, comparing runs.

Each client script logs, per rank, one JSON line per training batch: ``{"epoch": e, "step": s, "ids": [...]}`` where
``step`` is the number of optimizer steps completed before that batch. A resume from a checkpoint taken after ``S``
steps must log exactly the baseline's batches from step ``S`` on (same ranks) or, on another number of processes,
exactly the baseline's remaining samples of each epoch (as a multiset: 0 lost, 0 repeated).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

from tests.fixtures.data import write_mds
from tests.multiproc import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Samples in the trainers' dataset: 2 ranks x 24 per device = a global batch of 48, 20 steps per epoch.
SAMPLES = 960
PER_DEVICE = 24
STEPS_PER_EPOCH = SAMPLES // (2 * PER_DEVICE)
#: Samples in the validation split (not a multiple of the global batch: the last batch is short).
VAL_SAMPLES = 100


def make_dataset(root: str) -> str:
    """Write the trainers' MDS dataset under ``root``: split ``train`` (ids ``0..SAMPLES-1``) and split ``val``
    (ids ``SAMPLES..SAMPLES+VAL_SAMPLES-1``); returns the dataset's directory."""
    path = os.path.join(root, 'data')
    write_mds(os.path.join(path, 'train'), SAMPLES, size_limit=1 << 11)
    write_mds(os.path.join(path, 'val'), VAL_SAMPLES, start=SAMPLES, size_limit=1 << 11)
    return path


def env(**extra: str) -> dict[str, str]:
    """The environment of a client run: the repo importable, one thread per process, loopback rendezvous."""
    out = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(free_port()), TOKENIZERS_PARALLELISM='false', HF_HUB_OFFLINE='1',
               TRANSFORMERS_OFFLINE='1', PYTHONWARNINGS='ignore::UserWarning')
    for name in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK'):
        out.pop(name, None)
    out.update(extra)
    return out


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class KnownForkHang(AssertionError):
    """A run hung in CPython's own fork bug (gh-112275; see :mod:`streaming_core.machinery.fork_hazard`): a forked
    DataLoader worker stuck inside ``os.fork()`` waiting for the interpreter's thread-list lock. The trainer tests
    rerun once on it (``tests/trainers/conftest.py``); any other hang fails them."""


#: The native frames of a child stuck in gh-112275, innermost first (gdb's ``bt`` of its one thread).
FORK_HANG_FRAMES = ('_PyThreadState_DeleteExcept', '_PyEval_ReInitThreads', 'PyOS_AfterFork_Child')


def known_fork_hang(native: str) -> bool:
    """Whether ``native`` (:func:`native_stacks`' text) shows a process stuck in CPython's fork bug gh-112275: a
    thread whose stack holds :data:`FORK_HANG_FRAMES` in that order, waiting on a lock."""
    for thread in native.split('\nThread ')[1:]:
        frames = [line for line in thread.splitlines() if line.startswith('#')]
        names = [next((name for name in FORK_HANG_FRAMES if f' {name} (' in frame), None) for frame in frames]
        found = [name for name in names if name is not None]
        if found[:3] == list(FORK_HANG_FRAMES) and any('acquire_lock' in frame for frame in frames[:10]):
            return True
    return False


def hang_error(what: str, native: str, report: str, stacks: str) -> AssertionError:
    """The failure of a hung run: :class:`KnownForkHang` where ``native`` shows gh-112275, else an AssertionError."""
    if known_fork_hang(native):
        return KnownForkHang(f'{what} in CPython\'s fork bug gh-112275 (a forked worker stuck inside os.fork()) '
                             f'(full report: {report}); {stacks}')
    return AssertionError(f'{what} (full report: {report}); {stacks}')


def _stat_fields(pid: str) -> list[str] | None:
    try:
        with open(f'/proc/{pid}/stat') as stat:
            return stat.read().rsplit(')', 1)[1].split()
    except OSError:
        return None


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (read from ``/proc``; empty where there is none)."""
    entries = os.listdir('/proc') if os.path.isdir('/proc') else []
    return sorted(int(e) for e in entries if e.isdigit() and (f := _stat_fields(e)) is not None and int(f[2]) == pgid)


def family_pids(roots: list[int]) -> list[int]:
    """Those of ``roots`` still running and every process descended from them (read from ``/proc``)."""
    entries = os.listdir('/proc') if os.path.isdir('/proc') else []
    parents = {int(e): int(f[1]) for e in entries if e.isdigit() and (f := _stat_fields(e)) is not None}
    found = {pid for pid in roots if pid in parents}  # the ones still running
    while True:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        if not more:
            return sorted(found)
        found |= more


def native_stacks(pids: list[int]) -> str:
    """Every thread's native (C) stack in each process of ``pids``, from ``gdb`` where it is installed: a hang inside
    C (a fork handler, a lock in a library) shows no Python frame of its own."""
    gdb = shutil.which('gdb')
    if gdb is None:
        return 'gdb is not installed: no native stacks.'
    parts = []
    for pid in pids:
        try:
            out = subprocess.run([gdb, '-p', str(pid), '-batch', '-nx', '-ex', 'thread apply all bt 40'],
                                 capture_output=True, text=True, timeout=60)
            text = out.stdout
        except (OSError, subprocess.TimeoutExpired) as err:
            text = f'gdb failed: {err}'
        parts.append(f'===== pid {pid} =====\n{text}')
    return '\n'.join(parts)


def _wait_gone(pid: int, seconds: float) -> None:
    """Wait until process ``pid`` has exited (or is a zombie), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f'/proc/{pid}/stat') as handle:
                if handle.read().rpartition(')')[2].split()[0] == 'Z':
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.02)


def hang_report(command: list[str], timeout: float, stdout: str, stderr: str, native: str) -> str:
    """Write everything a hung run left (its output whole, faulthandler's Python stacks, gdb's native stacks) to a
    file under the system temporary directory, kept after the test; returns its path."""
    fd, path = tempfile.mkstemp(prefix='streaming-core-hang-', suffix='.txt')
    with os.fdopen(fd, 'w') as out:
        out.write(f'{" ".join(command)}\nhung for {timeout:.0f} s\n\n===== stdout =====\n{stdout}\n'
                  f'===== stderr (Python stacks) =====\n{stderr}\n===== native stacks =====\n{native}\n')
    return path


def run(command: list[str], timeout: float = 240, cwd: str = ROOT,
        **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run a client command (from the repo root unless ``cwd``); fail with its output's tail if it fails. A run that
    outlives ``timeout`` is a hang: the native stacks of every process it started are taken (gdb), then each prints
    its threads' Python stacks (faulthandler, SIGABRT to the process group); the failure shows the Python stacks and
    names a file with everything."""
    proc = subprocess.Popen(command, cwd=cwd, env=env(PYTHONFAULTHANDLER='1', **extra_env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        native = native_stacks(group_pids(proc.pid))
        os.killpg(proc.pid, signal.SIGABRT)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            _kill_group(proc.pid)
        report = hang_report(command, timeout, stdout, stderr, native)
        raise hang_error(f'{" ".join(command[:4])}... hung for {timeout:.0f} s', native, report,
                         f'the stacks of its processes:\n{stdout[-3000:]}\n{stderr[-30000:]}') from None
    finally:
        if proc.poll() is None:  # interrupted (a test timeout, Ctrl-C): no process of the run outlives the test
            _kill_group(proc.pid)
    result = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    if result.returncode != 0:
        raise AssertionError(f'{" ".join(command[:4])}... exited {result.returncode}:\n'
                             f'{result.stdout[-3000:]}\n{result.stderr[-6000:]}')
    return result


def torchrun(module: str, config: dict[str, Any], nproc: int = 2, timeout: float = 240,
             **extra_env: str) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc-per-node N -m module CONFIG`` on loopback."""
    port = free_port()
    command = [sys.executable, '-m', 'torch.distributed.run', '--nnodes', '1', '--nproc-per-node', str(nproc),
               '--master-addr', '127.0.0.1', '--master-port', str(port), '-m', module, json.dumps(config)]
    return run(command, timeout=timeout, MASTER_PORT=str(port), **extra_env)


def launch(module: str, config: dict[str, Any], nproc: int = 2, timeout: float = 240) -> None:
    """Start ``nproc`` rank processes of ``-m module CONFIG`` with torchrun's environment (without torchrun's own
    process: cheaper for the many resumes); fail with a failed rank's output, or, for a run that outlives
    ``timeout``, with every process's stacks as :func:`run` gives them."""
    port = str(free_port())
    procs = []
    for rank in range(nproc):
        variables = env(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nproc),
                        MASTER_PORT=port, PYTHONFAULTHANDLER='1')
        procs.append(subprocess.Popen([sys.executable, '-m', module, json.dumps(config)], cwd=ROOT, env=variables,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        family = family_pids([proc.pid for proc in procs])
        native = native_stacks(family)
        for pid in family:
            try:
                os.kill(pid, signal.SIGABRT)  # faulthandler prints each one's Python stacks
            except ProcessLookupError:
                continue
            _wait_gone(pid, 5.0)  # one at a time: a forked worker writes to its rank's output, never both at once
        for proc in procs[len(outputs):]:
            try:
                outputs.append(proc.communicate(timeout=30)[0])
            except subprocess.TimeoutExpired:
                outputs.append('(no output: it did not exit after SIGABRT)')
        stacks = '\n'.join(f'===== rank {rank} =====\n{output}' for rank, output in enumerate(outputs))
        report = hang_report([sys.executable, '-m', module, json.dumps(config)], timeout, '', stacks, native)
        raise hang_error(f'{module}: a rank hung for {timeout:.0f} s', native, report, stacks[-20000:]) from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    failed = [f'rank {rank} exited {proc.returncode}:\n{outputs[rank][-4000:]}'
              for rank, proc in enumerate(procs) if proc.returncode != 0]
    if failed:
        raise AssertionError('\n'.join(failed))


def read_log(run_dir: str) -> dict[int, list[dict[str, Any]]]:
    """Each rank's logged batches, in order: ``{rank: [{"epoch", "step", "ids"}, ...]}``."""
    out: dict[int, list[dict[str, Any]]] = {}
    for name in sorted(os.listdir(run_dir)):
        if name.startswith('log-rank') and name.endswith('.jsonl'):
            rank = int(name[len('log-rank'):-len('.jsonl')])
            with open(os.path.join(run_dir, name)) as handle:
                out[rank] = [json.loads(line) for line in handle if line.strip()]
    if not out:
        raise AssertionError(f'no sample log in {run_dir}: {os.listdir(run_dir)}')
    return out


def epoch_ids(log: dict[int, list[dict[str, Any]]], epoch: int, before: int | None = None,
              after: int | None = None) -> Counter[int]:
    """The multiset of sample ids every rank trained on in ``epoch`` (optionally only steps < before / >= after)."""
    out: Counter[int] = Counter()
    for batches in log.values():
        for batch in batches:
            if batch['epoch'] != epoch:
                continue
            if before is not None and batch['step'] >= before:
                continue
            if after is not None and batch['step'] < after:
                continue
            out.update(batch['ids'])
    return out


def lost_and_repeated(expected: Counter[int], got: Counter[int]) -> tuple[int, int]:
    """``(lost, repeated)`` sample counts of ``got`` against ``expected``."""
    lost = sum((expected - got).values())
    repeated = sum((got - expected).values())
    return lost, repeated


def assert_full_epochs(log: dict[int, list[dict[str, Any]]], epochs: int, samples: int = SAMPLES) -> None:
    """Every epoch of an uninterrupted run trains on every sample exactly once."""
    for epoch in range(epochs):
        lost, repeated = lost_and_repeated(Counter(range(samples)), epoch_ids(log, epoch))
        assert (lost, repeated) == (0, 0), f'baseline epoch {epoch}: {lost} lost, {repeated} repeated'


def assert_exact_resume(baseline: dict[int, list[dict[str, Any]]], resumed: dict[int, list[dict[str, Any]]],
                        step: int, epochs: int, what: str) -> None:
    """A resume after ``step`` optimizer steps: per epoch 0 lost and 0 repeated against the baseline; with the same
    ranks, also every rank's batches in the same order as the baseline's."""
    problems = []
    for epoch in range(epochs):
        expected = epoch_ids(baseline, epoch)
        got = epoch_ids(baseline, epoch, before=step) + epoch_ids(resumed, epoch)
        lost, repeated = lost_and_repeated(expected, got)
        if lost or repeated:
            problems.append(f'epoch {epoch}: {lost} lost, {repeated} repeated')
    if not problems and sorted(resumed) == sorted(baseline):
        for rank, batches in resumed.items():
            want = [(b['epoch'], b['step'], b['ids']) for b in baseline[rank] if b['step'] >= step]
            have = [(b['epoch'], b['step'], b['ids']) for b in batches]
            if want != have:
                first = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b), min(len(want), len(have)))
                problems.append(f'rank {rank}: batches differ from the baseline from the resumed batch {first} on '
                                f'({len(want)} expected, {len(have)} got)')
    assert not problems, f'{what}: resume after step {step}: ' + '; '.join(problems)
