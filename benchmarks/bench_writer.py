"""Writer throughput: our MDSWriter against mosaicml-streaming 0.13's MDSWriter on identical samples.

Usage::

    .venv/bin/python benchmarks/bench_writer.py [--rounds 3] [--small 100000] [--image 20000]

Each measurement runs in a fresh subprocess (ours with this interpreter, the reference with ``.venv-ref/bin/python``
when that virtualenv exists), generates the same seeded samples before the clock starts, then times
``with MDSWriter(...) as w: for s in samples: w.write(s)`` into an empty temporary directory (default
``size_limit``, so the same shard boundaries). Rounds are interleaved (ours, reference, ours, ...) and the median
is reported. MB/s counts the uncompressed shard bytes (the ``raw_data`` sizes of the index, identical for both).
Uncompressed outputs are compared byte for byte.

Cases: ``small`` = ``{'id': int, 'data': 256 random bytes}``; ``image`` = ``{'id': int, 'image': uint8 32x32x3}``
as ``ndarray:uint8:32,32,3`` (3 KiB). Each without compression and with ``zstd`` (level 3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF_PYTHON = os.path.join(ROOT, '.venv-ref', 'bin', 'python')
CASES = {'small': {'id': 'int', 'data': 'bytes'}, 'image': {'id': 'int', 'image': 'ndarray:uint8:32,32,3'}}


def make_samples(case: str, count: int) -> list[dict[str, Any]]:
    import numpy as np
    rng = np.random.default_rng(1234)
    if case == 'small':
        blob = rng.integers(0, 256, count * 256, dtype=np.uint8).tobytes()
        return [{'id': i, 'data': blob[i * 256:(i + 1) * 256]} for i in range(count)]
    images = rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
    return [{'id': i, 'image': images[i]} for i in range(count)]


def worker(impl: str, case: str, compression: str | None, count: int, out: str) -> dict[str, Any]:
    """Runs inside the subprocess: build samples, time the writer, report."""
    if impl == 'ours':
        from streaming_mds import MDSWriter
    else:
        sys.path.insert(0, ROOT)
        from compat.reference_guard import assert_reference_streaming
        assert_reference_streaming()  # mosaicml-streaming 0.13 from .venv-ref, never our streaming-compat
        from streaming import MDSWriter
    samples = make_samples(case, count)
    # Warm up outside the clock: one-time imports, plugin discovery, codec library loading (for both writers).
    with MDSWriter(columns=CASES[case], out=out + '-warmup', compression=compression) as writer:
        for sample in samples[:100]:
            writer.write(sample)
    start = time.perf_counter()
    with MDSWriter(columns=CASES[case], out=out, compression=compression) as writer:
        for sample in samples:
            writer.write(sample)
    elapsed = time.perf_counter() - start
    with open(os.path.join(out, 'index.json')) as handle:
        shards = json.load(handle)['shards']
    digest = hashlib.sha256()
    if compression is None:
        for shard in shards:
            with open(os.path.join(out, shard['raw_data']['basename']), 'rb') as handle:
                digest.update(handle.read())
    return {'seconds': elapsed, 'raw_bytes': sum(s['raw_data']['bytes'] for s in shards), 'shards': len(shards),
            'digest': digest.hexdigest() if compression is None else None}


def run_one(impl: str, case: str, compression: str | None, count: int) -> dict[str, Any]:
    python = sys.executable if impl == 'ours' else REF_PYTHON
    scratch = tempfile.mkdtemp(prefix=f'bench-writer-{impl}-')
    try:
        args = [python, os.path.abspath(__file__), '--worker', impl, '--case', case, '--count', str(count),
                '--out', os.path.join(scratch, 'ds')]
        if compression:
            args += ['--compression', compression]
        env = dict(os.environ, PYTHONPATH=ROOT if impl == 'ours' else '')
        result = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=1800)
        if result.returncode:
            raise RuntimeError(f'{impl} worker failed:\n{result.stderr[-3000:]}')
        return json.loads(result.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--small', type=int, default=100_000, help='samples in the small case')
    parser.add_argument('--image', type=int, default=20_000, help='samples in the image case')
    parser.add_argument('--worker', choices=['ours', 'ref'])
    parser.add_argument('--case', choices=sorted(CASES))
    parser.add_argument('--count', type=int)
    parser.add_argument('--compression')
    parser.add_argument('--out')
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.case, args.compression, args.count, args.out)))
        return
    impls = ['ours'] + (['ref'] if os.path.exists(REF_PYTHON) else [])
    if len(impls) == 1:
        print(f'note: {REF_PYTHON} not found; measuring ours only (build it with compat/setup.sh)')
    rows = []
    for case, count in (('small', args.small), ('image', args.image)):
        for compression in (None, 'zstd'):
            results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
            for _ in range(args.rounds):
                for impl in impls:
                    results[impl].append(run_one(impl, case, compression, count))
            medians = {impl: statistics.median(r['seconds'] for r in runs) for impl, runs in results.items()}
            raw = results['ours'][0]['raw_bytes']
            same = None
            if compression is None and 'ref' in results:
                same = results['ours'][0]['digest'] == results['ref'][0]['digest'] and \
                    results['ours'][0]['raw_bytes'] == results['ref'][0]['raw_bytes']
            for impl in impls:
                seconds = medians[impl]
                rows.append((case, compression or 'none', impl, count, count / seconds, raw / seconds / 1e6,
                             medians['ours'] and medians.get('ref', seconds) / medians['ours'] if impl == 'ours'
                             else None, same))
    print(f'{"case":6} {"compr":5} {"impl":4} {"samples":>8} {"samples/s":>11} {"MB/s":>8} {"ours/ref":>8} '
          f'{"identical":>9}')
    for case, compression, impl, count, rate, mbs, ratio, same in rows:
        ratio_text = f'{ratio:.2f}x' if ratio is not None and impl == 'ours' and 'ref' in impls else ''
        same_text = '' if same is None or impl != 'ours' else ('yes' if same else 'NO')
        print(f'{case:6} {compression:5} {impl:4} {count:8d} {rate:11,.0f} {mbs:8.1f} {ratio_text:>8} {same_text:>9}')


if __name__ == '__main__':
    main()
