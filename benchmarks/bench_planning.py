"""Per-node cost of planning one epoch: streaming-core (py1e, py1n) vs mosaicml-streaming 0.13.

What one node computes before its first batch. Ours: ``EpochPlanner.plan_node`` (only that node's slice; py1e
replays the shared epoch rng for the earlier canonical nodes, py1n needs nothing from other nodes). The reference:
every node leader builds the whole world's partition (``get_partitions``), the whole shuffle (``get_shuffle``) and
maps one through the other, so its per-node cost is the full epoch.

Each shape runs in its own subprocess so its peak RSS (``ru_maxrss``) is clean; an address-space limit
(``--mem-limit-gb``) turns an allocation that would not fit into a reported failure instead of swapping or taking
the machine down, and a shape is skipped up front when its estimate exceeds the memory available right now.
Simulated shards only: no data is read.

Usage::

    .venv/bin/python benchmarks/bench_planning.py                       # 1e8 then 1e9, 1 and 64 nodes
    .venv/bin/python benchmarks/bench_planning.py --samples 1e7 --nodes 1,8 --no-reference
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS_PYTHON = sys.executable
REF_PYTHON = os.path.join(ROOT, '.venv-ref', 'bin', 'python')
RANKS, WORKERS, BATCH, SEED = 8, 2, 16, 9176

OURS_CHILD = '''
import json, resource, sys, time, warnings
warnings.simplefilter('ignore')
import numpy as np
from streaming_core.ordering.planner import EpochPlanner, default_shuffle_block_size
from streaming_core.ordering.world import World
algo, samples, nodes, node, shard, ranks, workers, batch, seed = sys.argv[1:10]
samples, nodes, node, shard = int(samples), int(nodes), int(node), int(shard)
sizes = np.full(samples // shard, shard, np.int64)
planner = EpochPlanner(sizes, [len(sizes)], [samples], [1.0], samples, int(batch), nodes, shuffle=True,
                       shuffle_algo=algo, shuffle_seed=int(seed), shuffle_block_size=default_shuffle_block_size(nodes))
world = World(0, nodes * int(ranks), int(ranks), 0, int(workers))
planner.shuffle_algorithm()  # plugin discovery outside the timing
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
out = planner.plan_node(world, 0, 0, node)
seconds = time.perf_counter() - start
print(json.dumps({'seconds': seconds, 'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  'base_mb': base / 1024, 'shape': list(out.shape), 'valid': int((out >= 0).sum())}))
'''

REF_CHILD = f'''
import sys; sys.path.insert(0, {ROOT!r})
from compat.reference_guard import assert_reference_streaming; assert_reference_streaming()
''' + '''
import json, logging, resource, sys, time, warnings
warnings.simplefilter('ignore'); logging.disable(logging.CRITICAL)
import numpy as np
from streaming.base.partition import get_partitions
from streaming.base.shuffle import get_shuffle
algo, samples, nodes, node, shard, ranks, workers, batch, seed = sys.argv[1:10]
samples, nodes, shard = int(samples), int(nodes), int(shard)
sizes = np.full(samples // shard, shard, np.int64)
block = max(4_000_000 // nodes, 1 << 18)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
ids = get_partitions('relaxed', samples, nodes, nodes, int(ranks), int(workers), int(batch), 0, None)
shuffle = get_shuffle(algo, sizes, nodes, int(seed), 0, block)
ids = np.where(ids == -1, -1, shuffle[ids])
seconds = time.perf_counter() - start
print(json.dumps({'seconds': seconds, 'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  'base_mb': base / 1024, 'shape': list(ids[0].shape), 'valid': int((ids[0] >= 0).sum())}))
'''


def mem_available_gb() -> float:
    """``MemAvailable`` from /proc/meminfo, in GiB."""
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith('MemAvailable:'):
                return int(line.split()[1]) / 2**20
    return 0.0


def estimate_gb(impl: str, algo: str, samples: int, nodes: int) -> float:
    """A rough peak for one run (bytes per sample from the algorithms' arrays), to skip what cannot fit."""
    node_samples = samples / nodes
    if impl == 'reference':
        return 48 * samples / 2**30 + 1.5  # partition copies, py1e float64 arrays + argsort, the gather
    if algo == 'py1e':
        return (28 * node_samples + 12 * node_samples) / 2**30 + 0.5  # one canonical node's sort + the slice
    return 13 * node_samples / 2**30 + 1.0  # uint32 share + int64 slice + a sort window


def run_child(impl: str, algo: str, samples: int, nodes: int, node: int, shard: int, limit_gb: float,
              timeout: float) -> dict:
    """Run one shape in a fresh process under an address-space limit; return its JSON report or an error."""
    python, code = (REF_PYTHON, REF_CHILD) if impl == 'reference' else (OURS_PYTHON, OURS_CHILD)
    argv = [python, '-c', code, algo, str(samples), str(nodes), str(node), str(shard), str(RANKS), str(WORKERS),
            str(BATCH), str(SEED)]
    limit = int(limit_gb * 2**30)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, OMP_NUM_THREADS='1')
    start = time.time()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=cap, env=env,
                              cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {'error': f'timed out after {timeout:.0f}s'}
    if proc.returncode:
        tail = proc.stderr.strip().splitlines()[-1:] or ['?']
        if 'MemoryError' in proc.stderr or 'Unable to allocate' in proc.stderr:
            return {'error': f'does not fit in the {limit_gb:.0f} GiB limit'}
        return {'error': f'exit {proc.returncode}: {tail[0][:100]}'}
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report['wall'] = time.time() - start
    return report


def main() -> None:
    """Parse arguments, run every shape (small ones first), print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--samples', default='1e8,1e9', help='comma-separated sample counts (run in this order)')
    parser.add_argument('--nodes', default='1,64', help='comma-separated node counts (NCN = nodes)')
    parser.add_argument('--algos', default='py1e,py1n')
    parser.add_argument('--shard', type=int, default=100_000, help='samples per simulated shard')
    parser.add_argument('--no-reference', action='store_true', help='skip mosaicml-streaming (.venv-ref)')
    parser.add_argument('--mem-limit-gb', type=float, default=20.0)
    parser.add_argument('--timeout', type=float, default=1200.0, help='seconds per shape')
    parser.add_argument('--json', help='also write the rows to this file')
    args = parser.parse_args()
    sample_counts = [int(float(x)) for x in args.samples.split(',')]
    node_counts = [int(x) for x in args.nodes.split(',')]
    algos = args.algos.split(',')
    reference = not args.no_reference and os.path.exists(REF_PYTHON)
    rows = []
    print(f'load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {mem_available_gb():.1f} GiB available; '
          f'{RANKS} ranks/node, {WORKERS} workers/rank, batch {BATCH}, shards of {args.shard} samples', flush=True)
    for samples in sample_counts:
        for nodes in node_counts:
            for algo in algos:
                targets = [('ours', n) for n in sorted({0, nodes - 1})]
                if reference and algo != 'py1n':
                    targets.append(('reference', 0))
                for impl, node in targets:
                    need = estimate_gb(impl, algo, samples, nodes)
                    free = mem_available_gb()
                    if need > min(free - 1.0, args.mem_limit_gb):
                        result = {'error': f'skipped: needs ~{need:.0f} GiB, {free:.0f} GiB available '
                                           f'(limit {args.mem_limit_gb:.0f})'}
                    else:
                        result = run_child(impl, algo, samples, nodes, node, args.shard, args.mem_limit_gb,
                                           args.timeout)
                    row = {'samples': samples, 'nodes': nodes, 'impl': impl, 'algo': algo,
                           'node': 'all' if impl == 'reference' else node, **result}
                    rows.append(row)
                    print(format_row(row), flush=True)
    print()
    print(table(rows))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(rows, f, indent=1)


def format_row(row: dict) -> str:
    """One line of the table."""
    head = f'{row["samples"]:>13,} {row["nodes"]:>5} {row["impl"]:<9} {row["algo"]:<5} {str(row["node"]):>4}'
    if 'error' in row:
        return f'{head}  {row["error"]}'
    return (f'{head} {row["seconds"]:>9.2f} {row["peak_mb"]:>10,.0f} {row["peak_mb"] - row["base_mb"]:>10,.0f} '
            f'{row["valid"]:>13,}')


def table(rows: list[dict]) -> str:
    """The whole table with a header."""
    header = (f'{"samples":>13} {"nodes":>5} {"impl":<9} {"algo":<5} {"node":>4} {"seconds":>9} {"peak MB":>10} '
              f'{"+MB":>10} {"ids planned":>13}')
    return '\n'.join([header, '-' * len(header), *(format_row(r) for r in rows)])


if __name__ == '__main__':
    main()
