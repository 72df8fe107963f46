"""Process helpers for the hardening tests: the memory-capped read server, spawning and killing workers."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Address space a hostile file may make the reader allocate beyond its own imports.
READ_HEADROOM_MB = 384
#: How long one read of a hostile dataset may take before it counts as a hang.
READ_TIMEOUT = 20.0


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a worker process: the repository on the path, one OpenMP thread."""
    return dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1', **extra)


def spawn(module: str, *args: str, env: dict[str, str] | None = None, log: str | None = None
          ) -> subprocess.Popen[bytes]:
    """Start ``python -m module args...`` in the repository root (output to ``log``, else a pipe)."""
    out: Any = open(log, 'ab') if log else subprocess.PIPE
    try:
        return subprocess.Popen([sys.executable, '-m', module, *args], cwd=ROOT, env=env or child_env(),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        if log:
            out.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str = 'condition',
             proc: subprocess.Popen[bytes] | None = None, log: str | None = None) -> None:
    """Poll ``predicate`` every 20 ms; fail after ``timeout`` (or as soon as ``proc`` exits)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f'process exited ({proc.returncode}) before {what}:\n{tail(log)}')
        if time.monotonic() > deadline:
            raise AssertionError(f'{what} not reached within {timeout} s:\n{tail(log)}')
        time.sleep(0.02)


def tail(log: str | None, size: int = 4000) -> str:
    """The end of a log file ('' when absent)."""
    if not log or not os.path.exists(log):
        return ''
    with open(log, errors='replace') as handle:
        return handle.read()[-size:]


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process we started and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (read from /proc)."""
    try:
        with open(f'/proc/{pid}/stat') as handle:
            state = handle.read().rsplit(')', 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ('Z', 'X')


def children_of(pid: int) -> list[int]:
    """The direct children of ``pid``, from /proc (no psutil)."""
    found = []
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat') as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(name))
    return sorted(found)


def read_json(path: str) -> Any:
    """A JSON file's content, or None while it does not exist yet (or is being replaced)."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


class ReadServer:
    """The client side of ``workers/read_server.py``: one long-lived capped reader, restarted after a crash.

    :meth:`read` returns the server's answer, or ``{'ok': False, 'type': 'CRASH'|'HANG', ...}`` when the process
    died or did not answer within ``timeout`` seconds (it is then replaced by a fresh one).
    """

    #: Reads per server process (a fresh interpreter now and then keeps a long soak independent of any slow
    #: leak; test_resources.py checks that there is none).
    READS_PER_PROCESS = 2000

    def __init__(self, headroom_mb: int = READ_HEADROOM_MB) -> None:
        self.headroom_mb = headroom_mb
        self.proc: subprocess.Popen[bytes] | None = None
        self.limit = 0
        self.reads = 0

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, '-m', 'tests.hardening.workers.read_server', str(self.headroom_mb)],
                                cwd=ROOT, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        ready = self._answer(proc, 120.0)
        if not ready or not ready.get('ready'):
            proc.kill()
            proc.wait()
            raise RuntimeError(f'read server did not start: {ready}')
        self.limit = int(ready['limit'])
        return proc

    @staticmethod
    def _answer(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = proc.stdout.readline()
        return json.loads(line) if line else None

    def read(self, directory: str, *, allow_unsafe_types: bool = False,
             timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        """Read every sample of the dataset in ``directory`` in the capped process."""
        if self.proc is not None and self.reads >= self.READS_PER_PROCESS:
            self.close()
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
            self.reads = 0
        self.reads += 1
        proc = self.proc
        assert proc.stdin is not None
        proc.stdin.write((json.dumps({'dir': directory, 'allow_unsafe_types': allow_unsafe_types}) + '\n').encode())
        proc.stdin.flush()
        answer = self._answer(proc, timeout)
        if answer is not None:
            return answer
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            self.proc = None
            return {'ok': False, 'type': 'HANG', 'mro': [], 'streaming': False,
                    'message': f'no answer within {timeout} s'}
        self.proc = None
        return {'ok': False, 'type': 'CRASH', 'mro': [], 'streaming': False,
                'message': f'the reader died with exit status {proc.returncode}'}

    def close(self) -> None:
        """Stop the server."""
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def describe(result: dict[str, Any]) -> str:
    """A one-line description of a read result for assertion messages."""
    if result.get('ok'):
        return f'ok ({result.get("samples")} samples)'
    return f'{result.get("type")} (caused by {result.get("causes")}): {result.get("message")}'


def refused_properly(result: dict[str, Any]) -> bool:
    """The hostile-input contract: success, or a StreamingError that is not a disguised resource failure (never a
    crash, a hang, an exhausted memory cap or any other exception)."""
    if result.get('ok'):
        return True
    exhausted = {'MemoryError'} & {result.get('type'), *result.get('causes', [])}
    return bool(result.get('streaming')) and not exhausted


# ----------------------------------------------------------------------------------------------------------------
# Simulated multi-node jobs (one process per rank, torchrun-style environment, gloo).
def free_port() -> int:
    """A free TCP port on loopback."""
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Job:
    """A simulated job: ``nodes x ranks_per_node`` rank processes of ``workers/train.py``.

    Each node gets its own cache root (``STREAMING_CORE_CACHE_DIR``); ``config_of(node)`` gives the rank config of
    a node (so each node can have its own local directories). Logs go to ``root/rank{r}.log``, results to
    ``root/rank{r}.json``.
    """

    def __init__(self, root: str, nodes: int, ranks_per_node: int, config_of: Callable[[int], dict[str, Any]],
                 module: str = 'tests.hardening.workers.train', tag: str = '') -> None:
        self.root = root
        self.nodes = nodes
        self.ranks_per_node = ranks_per_node
        self.world = nodes * ranks_per_node
        self.tag = tag
        port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []
        for rank in range(self.world):
            node = rank // ranks_per_node
            env = child_env(RANK=str(rank), WORLD_SIZE=str(self.world), LOCAL_WORLD_SIZE=str(ranks_per_node),
                            LOCAL_RANK=str(rank % ranks_per_node), MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),
                            STREAMING_CORE_CACHE_DIR=os.path.join(root, f'node{node}-cache'))
            if os.path.exists(self.output(rank)):
                os.remove(self.output(rank))
            self.procs.append(spawn(module, json.dumps(config_of(node)), self.output(rank), env=env,
                                    log=self.log(rank)))

    def output(self, rank: int) -> str:
        """Where rank ``rank`` writes its result."""
        return os.path.join(self.root, f'rank{rank}{self.tag}.json')

    def log(self, rank: int) -> str:
        """Rank ``rank``'s combined stdout/stderr."""
        return os.path.join(self.root, f'rank{rank}{self.tag}.log')

    def wait(self, timeout: float) -> list[int]:
        """Wait for every rank (killing all of them past ``timeout``); returns the exit statuses."""
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.kill_all()
                raise AssertionError(f'job did not finish within {timeout} s:\n' + self.logs()) from None
        return [proc.returncode for proc in self.procs]

    def results(self, timeout: float) -> list[dict[str, Any]]:
        """Wait for a successful run and return each rank's result."""
        codes = self.wait(timeout)
        if any(codes):
            errors = [(read_json(self.output(rank)) or {}).get('error') for rank in range(self.world)]
            details = '\n'.join(f'rank {rank}: {error["type"]}: {error["message"]}\n{error["traceback"][-3000:]}'
                                for rank, error in enumerate(errors) if error)
            raise AssertionError(f'ranks failed with {codes}:\n{details}\n{self.logs()}')
        return [read_json(self.output(rank)) for rank in range(self.world)]

    def kill_all(self) -> None:
        """SIGKILL every rank (as a launcher does when one rank dies) and reap them."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(timeout=30)

    def logs(self, size: int = 2500) -> str:
        """The end of every rank's log."""
        return '\n'.join(f'--- rank {r} ---\n{tail(self.log(r), size)}' for r in range(self.world))


def read_steps(path: str) -> list[dict[str, Any]]:
    """The complete lines of a rank's steps log (a line cut by a SIGKILL is ignored)."""
    if not os.path.exists(path):
        return []
    steps = []
    with open(path) as handle:
        for line in handle:
            try:
                steps.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return steps


# ----------------------------------------------------------------------------------------------------------------
# Random faults on top of the fault proxy.
def random_fault_proxy(upstream: str, *, seed: int, rate: float, path: str = r'/shard\.|index\.json',
                       stall_seconds: float = 3.0, max_consecutive: int = 2,
                       kinds: tuple[str, ...] = ('status', 'reset', 'stall', 'truncate')) -> Any:
    """A started :class:`~tests.fixtures.fault_proxy.FaultProxy` that also injects a random fault into a fraction
    ``rate`` of the GETs whose path matches ``path``: a 5xx, a reset, a stall of ``stall_seconds`` (before the
    answer or mid-body) or a truncated body. The kinds take turns, so a few faults cover them all; at most
    ``max_consecutive`` faults hit the same object in a row, so ``download_retry >= max_consecutive`` always
    recovers. ``proxy.injected`` counts the faults per kind.
    """
    import collections
    import random
    import re
    import threading

    from tests.fixtures.fault_proxy import Fault, FaultProxy

    class RandomFaultProxy(FaultProxy):
        def __init__(self) -> None:
            super().__init__(upstream)
            self.rng = random.Random(seed)
            self.pattern = re.compile(path)
            self.streak: collections.Counter[str] = collections.Counter()
            self.injected: collections.Counter[str] = collections.Counter()
            self.turn = 0
            self.random_lock = threading.Lock()

        def _take_fault(self, method: str, target: str) -> Fault | None:
            queued = super()._take_fault(method, target)
            if queued is not None or method != 'GET' or not self.pattern.search(target):
                return queued
            with self.random_lock:
                if self.streak[target] >= max_consecutive or self.rng.random() >= rate:
                    self.streak[target] = 0
                    return None
                self.streak[target] += 1
                kind = kinds[self.turn % len(kinds)]
                self.turn += 1
                self.injected[kind] += 1
                fault = Fault(kind, status=self.rng.choice([500, 502, 503, 504]), seconds=stall_seconds,
                              phase=self.rng.choice(['before', 'body']), keep=self.rng.choice([0.0, 0.3, 0.9]))
                fault.hits = 1
                return fault

    return RandomFaultProxy().start()
