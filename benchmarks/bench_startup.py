"""Start-up at many shards: construct + first sample, cold and warm, 0 and 2 DataLoader workers, with memory.

Usage::

    .venv/bin/python benchmarks/bench_startup.py                        # 1e3, 1e4, 1e5 shards, 3 warm rounds
    .venv/bin/python benchmarks/bench_startup.py --shards 1e3,1e4,1e5,1e6 --rounds 5

Data: tiny MDS shards of 8 samples (``{'id': int, 'data': 32 bytes}``) written by our ``MDSWriter``: four real
shards, and an ``index.json`` of ``N`` entries written directly whose files are hard links to those four (same
bytes, so every entry is valid and every shard readable; at ``--index-only`` sizes and above the links are not made
and only the first shards exist, which is all the 0-worker rows touch).

Every measurement runs in a fresh interpreter (``python -c``), so nothing of ours is imported or cached in memory.
Bytecode is cached (``PYTHONDONTWRITEBYTECODE`` is dropped and the script re-executes itself with
``PYTHONPYCACHEPREFIX``), and one unrecorded cold and 2-worker run compiles everything first, so no measured process
compiles a module from source (the peers' site-packages hold ``.pyc`` files):

* **import**: ``import streaming_core`` and the MDS plugin.
* **cold**: the first process on the node: an empty cache root (no binary index); the data files sit in the page
  cache, as after writing. From the constructor call to the first sample (``dataset[0]``), imports excluded. The
  median of ``--cold-rounds`` such processes (a single one varies by 15-25% on a 2-core machine).
* **warm**: the same with the binary index present (median of ``--rounds`` fresh processes).
* **warm, 2 workers**: constructor to the first batch (batch size 4) of a ``DataLoader`` with 2 fork workers; in
  parentheses the DataLoader's floor: the first batch of a trivial ``IterableDataset`` through the same loader in
  the same kind of process (our dataset constructed before the clock), the part of the time that is not ours.
* **gc**: every child (ours and the peers') runs ``gc.collect()`` after its imports, before its clock: importing
  torch leaves a full collection pending, which otherwise falls inside whichever timed window allocates enough.
* **RSS**: the process's peak resident set (``VmHWM``) after the first sample, and the dataset's own share:
  the resident set after the first sample minus the one after the imports (the interpreter, torch and the
  imports excluded).

Peers, in the same run, each in a fresh interpreter of the reference virtualenv (``.venv-ref``, see ``compat/``;
``STREAMING_REF_VENV`` overrides it), with a private ``TMPDIR``:

* **reference** (mosaicml-streaming 0.13, checked by ``compat/reference_guard.py``): ``StreamingDataset(local=...)``
  over a hard-linked copy of the same directory (so the two never share lock files), constructor to ``ds[0]``,
  after ``clean_stale_shared_memory()``. It keeps nothing between processes, so every process is "cold". The
  median of ``--cold-rounds`` processes per size (``--ref-max`` bounds the sizes: at 10^6 shards it takes minutes and
  several GB).
* **litdata** (0.2.76, installed by ``compat/setup.sh --bench``): four real chunks written by ``litdata.optimize``
  (8 samples each), and an ``index.json`` of ``N`` chunks hard-linked to them (index-only beyond
  ``--index-only``, like ours); ``litdata.StreamingDataset(input_dir=...)`` constructor to ``ds[0]``.

A peer that is not installed prints ``n/a``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = 4
#: Where every measured process keeps its bytecode (see :func:`_reexec_with_bytecode`).
PYCACHE = os.path.join(tempfile.gettempdir(), 'streaming-core-bench-pycache')

_CHILD = '''
import json, os, sys, time
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
t0 = time.perf_counter()
import streaming_core, streaming_mds
from streaming_core import StreamingDataset
t1 = time.perf_counter()
import gc; gc.collect()  # settle the imports' pending full collection before the clock (every child)
base = rss()
t2 = time.perf_counter()
if FLOOR:  # the DataLoader's own cost: a trivial dataset through the same loader (nothing of ours touched)
    from torch.utils.data import DataLoader, IterableDataset
    class Trivial(IterableDataset):
        def __iter__(self):
            return iter(range(8))
    ds = StreamingDataset(local=LOCAL, batch_size=4)  # constructed before the clock (its imports and plugins)
    t2 = time.perf_counter()
    first = next(iter(DataLoader(Trivial(), batch_size=4, num_workers=WORKERS, multiprocessing_context='fork')))
else:
    ds = StreamingDataset(local=LOCAL, batch_size=4)
    if WORKERS:
        from torch.utils.data import DataLoader
        first = next(iter(DataLoader(ds, batch_size=4, num_workers=WORKERS, multiprocessing_context='fork')))
    else:
        first = ds[0]
t3 = time.perf_counter()
with open('/proc/self/status') as f:  # VmHWM: ru_maxrss would count the parent's memory at fork
    hwm = [int(line.split()[1]) * 1024 for line in f if line.startswith('VmHWM:')][0]
print(json.dumps({'import_s': t1 - t0, 'first_s': t3 - t2, 'own_rss': rss() - base, 'max_rss': hwm,
                  'shards': ds.num_shards, 'built': bool(ds.catalogue.sources[0].built_here)}))
'''


_PEER_HEAD = '''
import json, os, sys, time
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
def hwm():
    with open('/proc/self/status') as f:
        return [int(line.split()[1]) * 1024 for line in f if line.startswith('VmHWM:')][0]
'''

_REF_CHILD = '''
t0 = time.perf_counter()
from streaming import StreamingDataset
from streaming.base.util import clean_stale_shared_memory
t1 = time.perf_counter()
clean_stale_shared_memory()
import gc; gc.collect()  # settle the imports' pending full collection before the clock (every child)
base = rss()
t2 = time.perf_counter()
ds = StreamingDataset(local=LOCAL, batch_size=4)
first = ds[0]
t3 = time.perf_counter()
assert int(first['id']) == 0, first
print(json.dumps({'import_s': t1 - t0, 'first_s': t3 - t2, 'own_rss': rss() - base, 'max_rss': hwm(),
                  'shards': len(ds.shards)}))
'''

_LITDATA_WRITE = '''
import logging
from litdata import optimize
def item(i):
    return {'id': i, 'data': i.to_bytes(8, 'little') * 4}
logging.getLogger('litdata').setLevel(logging.ERROR)
optimize(fn=item, inputs=list(range(COUNT)), output_dir=OUT, chunk_size=8, num_workers=1, reorder_files=False,
         verbose=False, mode='overwrite', start_method='fork')
'''

_LITDATA_CHILD = '''
import logging
t0 = time.perf_counter()
from litdata import StreamingDataset
t1 = time.perf_counter()
logging.getLogger('litdata').setLevel(logging.ERROR)
import gc; gc.collect()  # settle the imports' pending full collection before the clock (every child)
base = rss()
t2 = time.perf_counter()
ds = StreamingDataset(input_dir=LOCAL)
first = ds[0]
t3 = time.perf_counter()
assert int(first['id']) == 0, first
print(json.dumps({'import_s': t1 - t0, 'first_s': t3 - t2, 'own_rss': rss() - base, 'max_rss': hwm(),
                  'shards': len(ds.subsampled_files)}))
'''


def ref_python() -> str | None:
    """The reference virtualenv's interpreter, or ``None`` when it is not built."""
    venv = os.environ.get('STREAMING_REF_VENV') or os.path.join(ROOT, '.venv-ref')
    python = os.path.join(venv, 'bin', 'python')
    return python if os.path.exists(python) else None


def peer_available(python: str | None, module: str) -> bool:
    """Whether ``module`` imports in the reference virtualenv."""
    if python is None:
        return False
    return subprocess.run([python, '-c', f'import {module}'], capture_output=True, timeout=300).returncode == 0


def run_peer(python: str, code: str, scratch: str, timeout: float = 3600) -> dict[str, Any]:
    """One measurement of a peer in a fresh interpreter of the reference virtualenv, with a private ``TMPDIR``."""
    tmpdir = tempfile.mkdtemp(prefix='tmp-', dir=scratch)
    env = dict(os.environ, PYTHONPATH='', TMPDIR=tmpdir)
    env.pop('STREAMING_CORE_CACHE_DIR', None)
    proc = subprocess.run([python, '-c', code], capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f'peer child failed: {proc.stderr[-2000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


def reference_row(python: str, local: str, scratch: str) -> dict[str, Any]:
    """The reference over a hard-linked copy of ``local`` (see the module doc)."""
    if ROOT not in sys.path:
        sys.path.append(ROOT)
    from compat.reference_guard import GUARD_SNIPPET
    copy = os.path.join(scratch, 'ref-copy')
    shutil.rmtree(copy, ignore_errors=True)
    os.makedirs(copy)
    for name in os.listdir(local):
        os.link(os.path.join(local, name), os.path.join(copy, name))
    try:
        code = GUARD_SNIPPET + _PEER_HEAD + f'LOCAL = {copy!r}\n' + _REF_CHILD
        return run_peer(python, code, scratch)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def make_litdata(python: str, path: str, num_shards: int, link: bool, scratch: str) -> str:
    """litdata's layout of the same shape as :func:`make_data`: four real 8-sample chunks by ``optimize``, and an
    ``index.json`` of ``num_shards`` chunks hard-linked to them."""
    real = os.path.join(path, 'real')
    os.makedirs(path, exist_ok=True)
    code = _PEER_HEAD + f'OUT = {real!r}\nCOUNT = {8 * REAL}\n' + _LITDATA_WRITE
    proc = subprocess.run([python, '-c', code], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH='', TMPDIR=tempfile.mkdtemp(prefix='tmp-', dir=scratch)))
    if proc.returncode:
        raise RuntimeError(f'litdata optimize failed: {proc.stderr[-2000:]}')
    with open(os.path.join(real, 'index.json')) as handle:
        index = json.load(handle)
    chunks = index['chunks']
    assert [c['chunk_size'] for c in chunks] == [8] * REAL, chunks
    entries = []
    for i in range(num_shards):
        entry = dict(chunks[i % REAL])
        entry['filename'] = f'chunk-{i:07}.bin'
        entries.append(entry)
        if link or i < REAL:
            os.link(os.path.join(real, chunks[i % REAL]['filename']), os.path.join(path, entry['filename']))
    index['chunks'] = entries
    with open(os.path.join(path, 'index.json'), 'w') as handle:
        json.dump(index, handle)
    shutil.rmtree(real)
    return path


def litdata_row(python: str, n: int, link: bool, base: str) -> dict[str, Any]:
    """litdata's construct + first sample over its own copy of the data shape."""
    path = os.path.join(base, f'litdata-{n}')
    shutil.rmtree(path, ignore_errors=True)
    try:
        make_litdata(python, path, n, link, base)
        return run_peer(python, _PEER_HEAD + f'LOCAL = {path!r}\n' + _LITDATA_CHILD, base)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_data(path: str, num_shards: int, link: bool) -> str:
    """Write four real 8-sample shards and an ``index.json`` of ``num_shards`` entries (see the module doc)."""
    from streaming_mds import MDSWriter
    os.makedirs(path, exist_ok=True)
    with MDSWriter(out=os.path.join(path, 'real'), columns={'id': 'int', 'data': 'bytes'}, size_limit=600) as w:
        for i in range(8 * REAL):
            w.write({'id': i, 'data': (i.to_bytes(8, 'little') * 4)})
    with open(os.path.join(path, 'real', 'index.json')) as handle:
        real = json.load(handle)['shards']
    assert [e['samples'] for e in real] == [8] * REAL
    entries = []
    for i in range(num_shards):
        entry = json.loads(json.dumps(real[i % REAL]))
        name = f'shard.{i:07}.mds'
        entry['raw_data']['basename'] = name
        entries.append(entry)
        if link or i < REAL:
            os.link(os.path.join(path, 'real', real[i % REAL]['raw_data']['basename']), os.path.join(path, name))
    with open(os.path.join(path, 'index.json'), 'w') as handle:
        json.dump({'shards': entries, 'version': 2}, handle)
    shutil.rmtree(os.path.join(path, 'real'))
    return path


def run_child(local: str, cache: str, workers: int, floor: bool = False) -> dict[str, Any]:
    """One measurement in a fresh interpreter (``floor``: a trivial dataset through the same DataLoader)."""
    code = f'LOCAL = {local!r}\nWORKERS = {workers}\nFLOOR = {floor}\n' + textwrap.dedent(_CHILD)
    env = dict(os.environ, STREAMING_CORE_CACHE_DIR=cache, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f'child failed: {proc.stderr[-2000:]}')
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median ``first_s`` (the upper one of an even count), whole, so its memory goes with its time."""
    return sorted(runs, key=lambda r: r['first_s'])[len(runs) // 2]


def _reexec_with_bytecode() -> None:
    """Run again with bytecode caching on, in ``PYCACHE`` (as ``bench_litdata.py`` and ``bench_parquet.py`` do).

    With ``PYTHONDONTWRITEBYTECODE=1`` (set on some machines) every measured process would compile our lazily
    imported modules (plugins, the binary index...) from source inside its timed window, while the peers import
    everything from their ``.pyc`` files before their timers start. Every child inherits this environment.
    """
    env = dict(os.environ, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def warm_bytecode(base: str) -> None:
    """Compile, unrecorded, what the measured processes import: one cold and one 2-worker run over 8 shards in a
    throwaway cache root (every plugin's module, the binary-index build and the DataLoader path)."""
    local, cache = os.path.join(base, 'warmup'), os.path.join(base, 'warmup-cache')
    make_data(local, 8, link=True)
    run_child(local, cache, 0)
    run_child(local, cache, 2)
    shutil.rmtree(local, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    """Parse arguments, write the data, measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--shards', default='1e3,1e4,1e5', help='comma-separated shard counts')
    parser.add_argument('--rounds', type=int, default=3, help='warm rounds per size (median shown)')
    parser.add_argument('--cold-rounds', type=int, default=3,
                        help='cold processes per size, ours and the reference\'s (median shown; each ours with an '
                             'empty cache root)')
    parser.add_argument('--index-only', type=float, default=2e5,
                        help='from this many shards on, only the first shards exist (no 2-worker row)')
    parser.add_argument('--data-dir', help='where to write the data (default: a temporary directory, removed)')
    parser.add_argument('--ref-max', type=float, default=1e6,
                        help='measure the reference up to this many shards (it needs minutes and GBs at 1e6)')
    parser.add_argument('--no-peers', action='store_true', help='ours only (no reference, no litdata)')
    args = parser.parse_args()
    if os.environ.get('PYTHONDONTWRITEBYTECODE') or os.environ.get('PYTHONPYCACHEPREFIX') != PYCACHE:
        _reexec_with_bytecode()
    python = None if args.no_peers else ref_python()
    has_ref = peer_available(python, 'streaming')
    has_litdata = peer_available(python, 'litdata')
    why = ' (--no-peers)' if args.no_peers else '' if python else ' (no .venv-ref: ./compat/setup.sh --bench)'
    print(f'# peers: reference {"yes" if has_ref else "n/a"}, litdata {"yes" if has_litdata else "n/a"}{why}',
          flush=True)
    sizes = [int(float(s)) for s in args.shards.split(',')]
    print(f'# bench_startup: {" ".join(sys.argv[1:]) or "(defaults)"}; load average '
          f'{" / ".join(f"{x:.2f}" for x in os.getloadavg())} on {os.cpu_count()} cores', flush=True)
    base = args.data_dir or tempfile.mkdtemp(prefix='bench-startup-')
    rows = []
    try:
        warm_bytecode(base)
        for n in sizes:
            local = os.path.join(base, f'ds-{n}')
            if os.path.exists(local):
                shutil.rmtree(local)
            start = time.perf_counter()
            make_data(local, n, link=n < args.index_only)
            index_mb = os.path.getsize(os.path.join(local, 'index.json')) / 2 ** 20
            print(f'  {n} shards: data written in {time.perf_counter() - start:.1f} s (index.json {index_mb:.1f} MB)',
                  flush=True)
            cache = os.path.join(base, f'cache-{n}')
            colds = []
            for _ in range(args.cold_rounds):  # each the first process of an empty cache root
                shutil.rmtree(cache, ignore_errors=True)
                colds.append(run_child(local, cache, 0))
                assert colds[-1]['built'] and colds[-1]['shards'] == n
            cold = _median_run(colds)
            warm = [run_child(local, cache, 0) for _ in range(args.rounds)]
            assert not any(w['built'] for w in warm)
            workers = [run_child(local, cache, 2) for _ in range(args.rounds)] if n < args.index_only else []
            floor = [run_child(local, cache, 2, floor=True) for _ in range(args.rounds)] if workers else []
            bin_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(os.path.join(cache, 'state'))
                         for f in files if f.endswith('.bin')) / 2 ** 20
            row = {'shards': n, 'index_mb': index_mb, 'bin_mb': bin_mb,
                   'import_ms': 1e3 * statistics.median(w['import_s'] for w in warm),
                   'cold_ms': 1e3 * cold['first_s'], 'warm_ms': 1e3 * statistics.median(w['first_s'] for w in warm),
                   'workers_ms': 1e3 * statistics.median(w['first_s'] for w in workers) if workers else None,
                   'floor_ms': 1e3 * statistics.median(w['first_s'] for w in floor) if floor else None,
                   'max_rss_mb': max(w['max_rss'] for w in warm) / 2 ** 20,
                   'own_rss_mb': statistics.median(w['own_rss'] for w in warm) / 2 ** 20,
                   'cold_own_rss_mb': cold['own_rss'] / 2 ** 20, 'ref_ms': None, 'ref_max_rss_mb': None,
                   'litdata_ms': None, 'litdata_max_rss_mb': None}
            if has_ref and python and n <= args.ref_max:
                ref = _median_run([reference_row(python, local, base) for _ in range(args.cold_rounds)])
                assert ref['shards'] == n, ref
                row['ref_ms'], row['ref_max_rss_mb'] = 1e3 * ref['first_s'], ref['max_rss'] / 2 ** 20
            if has_litdata and python:
                lit = litdata_row(python, n, n < args.index_only, base)
                assert lit['shards'] == n, lit
                row['litdata_ms'], row['litdata_max_rss_mb'] = 1e3 * lit['first_s'], lit['max_rss'] / 2 ** 20
            rows.append(row)
            print('  ' + json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}),
                  flush=True)
    finally:
        if not args.data_dir:
            shutil.rmtree(base, ignore_errors=True)
    print('\n| shards | index.json | binary index | import | cold: construct + first sample (own RSS) | '
          'warm: construct + first sample | warm, 2 workers: first batch (DataLoader floor) | warm own RSS | '
          'warm max RSS | '
          'reference: construct + first sample (max RSS) | cold / reference | litdata: construct + first sample '
          '(max RSS) |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        workers_ms = (f'{r["workers_ms"]:.0f} ms ({r["floor_ms"]:.0f} ms)' if r['workers_ms'] is not None
                      else 'n/a (index-only)')
        ref = f'{r["ref_ms"]:.0f} ms ({r["ref_max_rss_mb"]:.0f} MB)' if r['ref_ms'] is not None else 'n/a'
        ratio = f'1/{r["ref_ms"] / r["cold_ms"]:.1f}' if r['ref_ms'] is not None else 'n/a'
        lit = (f'{r["litdata_ms"]:.0f} ms ({r["litdata_max_rss_mb"]:.0f} MB)' if r['litdata_ms'] is not None
               else 'n/a')
        print(f'| {r["shards"]:,} | {r["index_mb"]:.1f} MB | {r["bin_mb"]:.1f} MB | {r["import_ms"]:.0f} ms | '
              f'{r["cold_ms"]:.0f} ms ({r["cold_own_rss_mb"]:.0f} MB) | {r["warm_ms"]:.1f} ms | {workers_ms} | '
              f'{r["own_rss_mb"]:.1f} MB | {r["max_rss_mb"]:.0f} MB | {ref} | {ratio} | {lit} |')
    print(f'# load average at the end {" / ".join(f"{x:.2f}" for x in os.getloadavg())}', flush=True)


if __name__ == '__main__':
    main()
