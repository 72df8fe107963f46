"""The orchestrating side of the iteration, access and cold-cache benchmarks (runs in ``.venv``).

It writes the identical data once per run (a seeded source array, then each library's native format from it),
keeps one fork server per library (``runner.py --serve``, started with the right virtualenv's interpreter),
sends them specs round-robin so the libraries' rounds interleave, and formats the tables.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUNNER = os.path.join(HERE, 'runner.py')
OURS_PYTHON = sys.executable
REF_PYTHON = os.path.join(ROOT, '.venv-ref', 'bin', 'python')
#: Which interpreter runs each implementation.
PYTHONS = {'ours': OURS_PYTHON, 'floor': OURS_PYTHON, 'reference': REF_PYTHON, 'litdata': REF_PYTHON,
           'webdataset': REF_PYTHON}
#: Which native dataset directory each implementation reads (the reference reads a hard-linked MDS copy).
FORMAT_DIR = {'ours': 'mds', 'floor': 'mds', 'reference': 'mds-ref', 'litdata': 'litdata',
              'webdataset': 'webdataset'}
ALL_IMPLS = ('ours', 'reference', 'litdata', 'webdataset', 'floor')
PEERS = ('reference', 'litdata', 'webdataset')

sys.path.insert(0, HERE)
from common import MDS_SAMPLE_BYTES, make_source  # noqa: E402

#: Where every measured process caches its bytecode (see :func:`child_env`).
PYCACHE = os.path.join(tempfile.gettempdir(), 'streaming-core-bench-pycache')


def child_env(tmpdir: str) -> dict[str, str]:
    """The environment of a measured process: a private ``TMPDIR``, no ``PYTHONPATH``, and bytecode caching on.

    Some machines set ``PYTHONDONTWRITEBYTECODE=1``; site-packages then still have the ``.pyc`` files pip wrote,
    but an editable install (ours, and its plugins, imported lazily when the first dataset is built) would be
    compiled from source inside every measurement. Every process gets the same treatment: bytecode written to and
    read from ``PYCACHE`` (outside the repository).
    """
    env = dict(os.environ, PYTHONPATH='', TMPDIR=tmpdir, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    return env


def available(impls: Sequence[str]) -> list[str]:
    """The implementations whose interpreter exists (the ``.venv-ref`` ones need ``compat/setup.sh --bench``)."""
    out = [impl for impl in impls if os.path.exists(PYTHONS[impl])]
    missing = [impl for impl in impls if impl not in out]
    if missing:
        print(f'note: {REF_PYTHON} not found; skipping {", ".join(missing)} (build it: compat/setup.sh --bench)')
    return out


def load_average() -> str:
    """``1/5/15-minute load averages on N cores``."""
    one, five, fifteen = os.getloadavg()
    return f'load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores'


class Server:
    """One implementation's fork server (see ``runner.py``)."""

    def __init__(self, impl: str, scratch: str) -> None:
        self.impl = impl
        self.scratch = scratch
        self.count = 0
        self.log_path = os.path.join(scratch, f'{impl}-server.log')
        env = dict(child_env(os.path.join(scratch, f'{impl}-tmp')), PYTHONUNBUFFERED='1')
        os.makedirs(env['TMPDIR'], exist_ok=True)
        self._log = open(self.log_path, 'wb')
        self.process = subprocess.Popen([PYTHONS[impl], RUNNER, '--serve', impl], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._log, text=True, env=env, cwd=ROOT)

    def run(self, spec: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
        """Run one spec in a fresh child of the server; returns its result (or ``{'error': ...}``)."""
        self.count += 1
        spec = dict(spec, impl=self.impl, timeout=int(timeout),
                    tmpdir=os.path.join(self.scratch, f'{self.impl}-tmp', str(self.count)))
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(spec) + '\n')
        self.process.stdin.flush()
        result: dict[str, Any] = {'error': 'no answer'}
        for line in self.process.stdout:
            if line.startswith('@@RESULT '):
                result = json.loads(line[len('@@RESULT '):])
            elif line.startswith('@@DONE'):
                break
        else:
            result = {'error': f'{self.impl} server exited: {self.tail()}'}
        shutil.rmtree(spec['tmpdir'], ignore_errors=True)
        return result

    def tail(self) -> str:
        """The end of the server's stderr."""
        self._log.flush()
        with open(self.log_path, errors='replace') as handle:
            return handle.read()[-2000:]

    def close(self) -> None:
        """End the server (EOF on its stdin)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()


class Servers:
    """Lazily started servers, one per implementation, and fresh one-off processes on request."""

    def __init__(self, scratch: str) -> None:
        self.scratch = scratch
        self._servers: dict[str, Server] = {}

    def run(self, impl: str, spec: dict[str, Any], timeout: float = 600.0, fresh: bool = False) -> dict[str, Any]:
        """Run ``spec`` on ``impl``'s server (or, with ``fresh``, in a new process); errors are printed."""
        if fresh:
            result = run_fresh(impl, spec, timeout)
        else:
            server = self._servers.get(impl)
            if server is None:
                server = self._servers[impl] = Server(impl, self.scratch)
            result = server.run(spec, timeout)
        if 'error' in result:
            print(f'  ! {impl}: {result["error"]}', flush=True)
            if result.get('trace'):
                print('    ' + result['trace'].strip().replace('\n', '\n    '), flush=True)
        return result

    def close(self) -> None:
        """Stop every server."""
        for server in self._servers.values():
            server.close()
        self._servers.clear()


def warm_up(servers: Servers, impls: Sequence[str], data: dict[str, Any], case: str, fresh: bool) -> None:
    """One unrecorded first-sample run per implementation: bytecode compiled and cached, lazy imports done once."""
    for impl in impls:
        servers.run(impl, {'task': 'first', 'case': case, 'source': data['source'], 'path': data['paths'][impl],
                           'seed': 0, 'batch_size': 256}, timeout=600, fresh=fresh)


def run_fresh(impl: str, spec: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
    """Run one spec in a new process (private ``TMPDIR``); returns its result or ``{'error': ...}``."""
    spec = dict(spec, impl=impl)
    with tempfile.TemporaryDirectory(prefix=f'bench-{impl}-') as tmp:
        env = child_env(tmp)
        try:
            proc = subprocess.run([PYTHONS[impl], RUNNER, json.dumps(spec)], capture_output=True, text=True,
                                  env=env, cwd=ROOT, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {'error': f'timed out after {timeout:.0f} s'}
    if proc.returncode:
        tail = proc.stderr.strip().splitlines()[-1:] or ['?']
        return {'error': f'exit {proc.returncode}: {tail[0][:200]}', 'trace': proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_once(impl: str, spec: dict[str, Any], timeout: float = 1800.0) -> dict[str, Any]:
    """Run one spec in a new process; raise if it fails (used for writing the datasets)."""
    result = run_fresh(impl, spec, timeout)
    if 'error' in result:
        raise RuntimeError(f'{impl} {spec["task"]} failed: {result["error"]}\n{result.get("trace", "")}')
    return result


# ----------------------------------------------------------------------------------------------------------------
# Data.
def mds_config_bytes(case: str, scratch: str) -> int:
    """The bytes an MDS shard header adds beyond ``4 + 4 (N + 1)``: the writer's config text (from a probe)."""
    probe = os.path.join(scratch, f'probe-{case}')
    source_path = os.path.join(scratch, f'probe-{case}.npy')
    np.save(source_path, make_source(case, 1))
    run_once('ours', {'task': 'write', 'case': case, 'source': source_path, 'path': probe, 'size_limit': 1 << 26,
                      'samples_per_shard': 0})
    with open(os.path.join(probe, 'index.json')) as handle:
        shard = json.load(handle)['shards'][0]
    size = shard['raw_data']['bytes']
    shutil.rmtree(probe, ignore_errors=True)
    return size - 12 - MDS_SAMPLE_BYTES[case]


def mds_size_limit(case: str, samples_per_shard: int, config_bytes: int) -> int:
    """The MDS ``size_limit`` that makes shards of exactly ``samples_per_shard`` samples (the writer counts
    ``8 + len(config)`` per shard and ``sample + 4`` per sample)."""
    return 8 + config_bytes + samples_per_shard * (MDS_SAMPLE_BYTES[case] + 4)


def prepare(data_dir: str, case: str, count: int, samples_per_shard: int, impls: Sequence[str],
            tag: str = '') -> dict[str, Any]:
    """Write the source and every needed native format under ``data_dir/<case><tag>``; reuse a finished one.

    Returns ``{'dir', 'source', 'paths': {impl: dataset dir}, 'shards', 'samples_per_shard', 'write_s'}``.
    """
    base = os.path.join(data_dir, f'{case}{tag}')
    os.makedirs(base, exist_ok=True)
    stamp_path = os.path.join(base, 'stamp.json')
    want = {'case': case, 'count': count, 'samples_per_shard': samples_per_shard}
    stamp: dict[str, Any] = {}
    if os.path.exists(stamp_path):
        with open(stamp_path) as handle:
            stamp = json.load(handle)
        if {k: stamp.get(k) for k in want} != want:
            shutil.rmtree(base)
            os.makedirs(base)
            stamp = {}
    stamp.update(want)
    stamp.setdefault('formats', [])
    source = os.path.join(base, 'source.npy')
    if not os.path.exists(source):
        np.save(source, make_source(case, count))
    formats = sorted({FORMAT_DIR[impl] for impl in impls} | {'mds'})
    write_s = {}
    limit = mds_size_limit(case, samples_per_shard, mds_config_bytes(case, base))
    for fmt in ('mds', 'mds-ref', 'litdata', 'webdataset'):
        if fmt not in formats or fmt in stamp['formats']:
            continue
        out = os.path.join(base, fmt)
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        if fmt == 'mds-ref':  # the same files, hard-linked: the reference's lock files never meet ours
            shutil.copytree(os.path.join(base, 'mds'), out, copy_function=os.link)
        else:
            writer = {'mds': 'ours'}.get(fmt, fmt)
            run_once(writer, {'task': 'write', 'case': case, 'source': source, 'path': out, 'size_limit': limit,
                              'samples_per_shard': samples_per_shard})
        write_s[fmt] = time.perf_counter() - start
        if fmt == 'mds':
            with open(os.path.join(out, 'index.json')) as handle:
                counts = [s['samples'] for s in json.load(handle)['shards']]
            if any(c != samples_per_shard for c in counts[:-1]):
                raise RuntimeError(f'MDS shards of {counts[:3]}... samples, expected {samples_per_shard} each')
        stamp['formats'].append(fmt)
        with open(stamp_path, 'w') as handle:
            json.dump(stamp, handle)
    shards = -(-count // samples_per_shard)
    return {'dir': base, 'source': source, 'paths': {impl: os.path.join(base, FORMAT_DIR[impl]) for impl in impls},
            'shards': shards, 'samples_per_shard': samples_per_shard, 'write_s': write_s}


def samples_per_shard_for(case: str, shard_mb: float) -> int:
    """How many samples of ``case`` make an MDS shard of about ``shard_mb`` MiB."""
    return max(1, int(shard_mb * 2**20) // (MDS_SAMPLE_BYTES[case] + 4))


# ----------------------------------------------------------------------------------------------------------------
# Statistics and tables.
def median(values: Sequence[float]) -> float:
    """The median (NaN for no values)."""
    return statistics.median(values) if values else float('nan')


def ratio(ours: float, other: float) -> str:
    """``ours / other`` as ``1.23x`` (blank when either is missing)."""
    if not ours or not other or ours != ours or other != other:
        return ''
    return f'{ours / other:.2f}x'


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str = '') -> str:
    """A plain-text table; ``align`` holds ``<`` or ``>`` per column (default: right)."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        parts = []
        for i, cell in enumerate(row):
            a = align[i] if i < len(align) else '>'
            parts.append(cell.ljust(widths[i]) if a == '<' else cell.rjust(widths[i]))
        out.append('  '.join(parts).rstrip())
        if n == 0:
            out.append('  '.join('-' * w for w in widths))
    return '\n'.join(out)


def fmt_rate(value: float) -> str:
    """Samples per second with thousands separators."""
    return '' if value != value else f'{value:,.0f}'


def print_profile(path: str, top: int = 14, cumulative: bool = False) -> None:
    """The functions with the most own time (or cumulative time), with their share of all own time profiled.

    ``path`` is what ``runner.profiled`` wrote (same-named code objects already summed).
    """
    with open(path) as handle:
        entries = json.load(handle)
    total = sum(e[2] for e in entries) or 1.0
    entries.sort(key=lambda e: e[3] if cumulative else e[2], reverse=True)
    print(f'    total {total:.3f} s of own time under cProfile')
    print(f'    {"own s":>7} {"share":>6} {"calls":>9} {"cum s":>7}  function')
    for label, calls, own, cum in entries[:top]:
        short = label.replace(ROOT + '/', '').split('site-packages/')[-1]
        share = (cum if cumulative else own) / total
        print(f'    {own:7.3f} {share:6.1%} {int(calls):9d} {cum:7.3f}  {short}')
