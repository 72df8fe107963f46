"""Run the benchmarks one after another (``make bench`` calls ``python -m benchmarks.run``).

Usage::

    .venv/bin/python -m benchmarks.run                      # iteration, access, cold_s3, writer, startup: ~17 min
    .venv/bin/python -m benchmarks.run --quick              # one round, smaller data: a few minutes
    .venv/bin/python -m benchmarks.run --only iteration,access
    .venv/bin/python -m benchmarks.run --planning           # also bench_planning (1e7 and 1e8 samples)

Each benchmark runs as its own process with this interpreter; its output is shown as it comes and saved to
``--out`` (default ``benchmarks/results/<date-time>/<name>.txt``, ignored by git). The iteration and cold-cache
benchmarks share one data directory (written once; removed at the end unless ``--data-dir`` is given). The
planning benchmark is opt-in: at its own defaults (1e8 and 1e9 samples) it takes far longer and tens of GiB;
``--planning`` runs it at 1e7 and 1e8 samples. The machine's load average is printed before and after each.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> (script, arguments for a full run, arguments for --quick). ``{data}`` is the shared data directory.
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    'iteration': ('bench_iteration.py', ['--data-dir', '{data}', '--max-seconds', '4'],
                  ['--data-dir', '{data}', '--rounds', '1', '--small', '100000', '--image', '20000',
                   '--max-seconds', '3']),
    'access': ('bench_access.py', ['--data-dir', '{data}'],
               ['--data-dir', '{data}', '--rounds', '1', '--count', '2000']),
    'cold_s3': ('bench_cold_s3.py', ['--data-dir', '{data}', '--max-seconds', '6'],
                ['--data-dir', '{data}', '--rounds', '1', '--small', '100000', '--workers', '0',
                 '--max-seconds', '4']),
    'writer': ('bench_writer.py', [], ['--rounds', '1', '--small', '20000', '--image', '5000']),
    'startup': ('bench_startup.py', ['--shards', '1e3,1e4,1e5'],
                ['--shards', '1e3,1e4', '--rounds', '1', '--cold-rounds', '1']),
    'planning': ('bench_planning.py', ['--samples', '1e7,1e8'], ['--samples', '1e7', '--nodes', '1,8']),
    'webdataset': ('bench_webdataset.py', [], ['--quick']),
    'parquet': ('bench_parquet.py', [], ['--quick']),
    'litdata': ('bench_litdata.py', [], ['--quick']),
    'versions': ('bench_versions.py', [], ['--quick']),
}
DEFAULT = ('iteration', 'access', 'cold_s3', 'writer', 'startup', 'webdataset', 'parquet', 'litdata', 'versions')


def run_one(name: str, args: list[str], out_dir: str) -> tuple[int, float]:
    """Run one benchmark, echoing and saving its output; returns (exit code, seconds)."""
    script = os.path.join(HERE, BENCHMARKS[name][0])
    command = [sys.executable, script, *args]
    root = os.path.dirname(HERE)
    shown = [os.path.relpath(c, root) if c.startswith(root + os.sep) else c for c in command]
    print(f'\n=== {name}: {" ".join(shown)}', flush=True)
    print(f'    load average {" / ".join(f"{x:.2f}" for x in os.getloadavg())} on {os.cpu_count()} cores',
          flush=True)
    start = time.monotonic()
    with open(os.path.join(out_dir, f'{name}.txt'), 'w') as log:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   cwd=os.path.dirname(HERE))
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)
        code = process.wait()
    return code, time.monotonic() - start


def main() -> None:
    """Parse arguments and run the selected benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--only', help=f'comma-separated subset of {", ".join(BENCHMARKS)}')
    parser.add_argument('--skip', default='', help='comma-separated benchmarks to leave out')
    parser.add_argument('--planning', action='store_true', help='also run bench_planning (opt-in: heavy)')
    parser.add_argument('--quick', action='store_true', help='one round and smaller data everywhere')
    parser.add_argument('--out', help='directory for the outputs (default benchmarks/results/<date-time>)')
    parser.add_argument('--data-dir', help='shared data directory to keep and reuse (default: temporary)')
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(',')] if args.only else list(DEFAULT)
    if args.planning and 'planning' not in names:
        names.append('planning')
    skip = {n.strip() for n in args.skip.split(',') if n.strip()}
    unknown = [n for n in [*names, *skip] if n not in BENCHMARKS]
    if unknown:
        parser.error(f'unknown benchmark(s) {unknown}; choose from {list(BENCHMARKS)}')
    names = [n for n in names if n not in skip]
    out_dir = args.out or os.path.join(HERE, 'results', datetime.datetime.now().strftime('%Y%m%d-%H%M%S'))
    os.makedirs(out_dir, exist_ok=True)
    data = args.data_dir or tempfile.mkdtemp(prefix='bench-data-')
    summary = []
    try:
        for name in names:
            template = BENCHMARKS[name][2 if args.quick else 1]
            code, seconds = run_one(name, [a.replace('{data}', data) for a in template], out_dir)
            summary.append((name, code, seconds))
    finally:
        if not args.data_dir:
            shutil.rmtree(data, ignore_errors=True)
    print('\n=== summary')
    for name, code, seconds in summary:
        print(f'  {name:10} {"ok" if code == 0 else f"FAILED (exit {code})":16} {seconds / 60:5.1f} min')
    print(f'  outputs in {out_dir}')
    if any(code for _, code, _ in summary):
        sys.exit(1)


if __name__ == '__main__':
    main()
