"""Time to first sample and random-access latency (``dataset[i]``) for 10 and 10,000 shards.

Usage::

    .venv/bin/python benchmarks/bench_access.py                       # 100k small samples, 10 and 10,000 shards
    .venv/bin/python benchmarks/bench_access.py --shards 10 --count 20000 --rounds 5

Same data for everyone: ``--samples`` small samples (``{'id': int, 'data': 256 bytes}``) cut into ``--shards``
shards of equal sample counts in each library's native format (MDS for us and the reference, litdata ``optimize``
chunks, webdataset tars), files in the page cache. Every measurement runs in a freshly forked process of that
library's interpreter with the library already imported.

* **first sample**: from constructing the dataset (``shuffle=False``, batch size 256) to the first sample of
  ``iter(dataset)`` (no DataLoader): index loading, planning and opening the first shard.
* **random access**: ``dataset[i]`` for ``--count`` uniformly random ids (seeded, the same ids for everyone), each
  timed on its own after one warm-up access; p50/p90/p99. With 10,000 shards most accesses touch a shard for the
  first time, so this measures opening a shard as much as reading from one.

webdataset has no random access (a tar stream can only be read in order): it gets the first-sample column only.
The floor maps each shard on first use and slices the sample (``peers/impl_floor.py``). Rounds are interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Any

try:
    from benchmarks.peers import driver
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from peers import driver

RANDOM_ACCESS = ('ours', 'reference', 'litdata', 'floor')


def measure(servers: driver.Servers, impls: list[str], data: dict[str, Any], shards: int,
            args: argparse.Namespace) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every implementation ``args.rounds`` times (rotating order), each measurement in a fresh process."""
    results: dict[str, dict[str, list[dict[str, Any]]]] = {i: {'first': [], 'access': []} for i in impls}
    for round_ in range(args.rounds):
        for impl in impls[round_ % len(impls):] + impls[:round_ % len(impls)]:
            base = {'case': 'small', 'source': data['source'], 'path': data['paths'][impl], 'seed': args.seed,
                    'batch_size': 256}
            first = servers.run(impl, dict(base, task='first'), timeout=300, fresh=True)
            line = f'  {shards} shards round {round_ + 1} {impl:10}'
            if 'error' not in first:
                results[impl]['first'].append(first)
                line += f' first {first["first_s"] * 1e3:7.1f} ms'
            if impl in RANDOM_ACCESS:
                access = servers.run(impl, dict(base, task='access', count=args.count), timeout=600, fresh=True)
                if 'error' not in access:
                    results[impl]['access'].append(access)
                    line += f'  p50 {access["p50_us"]:8.1f} us  p90 {access["p90_us"]:8.1f} us'
            print(line, flush=True)
    return results


def profile_ours(servers: driver.Servers, data: dict[str, Any], shards: int, args: argparse.Namespace,
                 scratch: str) -> None:
    """cProfile our first sample (by cumulative time) and our random accesses (by own time)."""
    base = {'case': 'small', 'source': data['source'], 'path': data['paths']['ours'], 'seed': args.seed,
            'batch_size': 256}
    for task, cumulative in (('first', True), ('access', False)):
        path = os.path.join(scratch, f'profile-{task}-{shards}.prof')
        result = servers.run('ours', dict(base, task=task, count=args.count, profile=path), fresh=True)
        if 'error' not in result:
            what = 'first sample, by cumulative time' if cumulative else 'random access, by own time'
            print(f'  {shards:,} shards, {what}:')
            driver.print_profile(path, top=18 if cumulative else 12, cumulative=cumulative)


def main() -> None:
    """Parse arguments, prepare the data, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--samples', type=int, default=100_000)
    parser.add_argument('--shards', default='10,10000', help='comma-separated shard counts')
    parser.add_argument('--count', type=int, default=5_000, help='random accesses per measurement')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--impls', default=','.join(driver.ALL_IMPLS))
    parser.add_argument('--seed', type=int, default=11)
    parser.add_argument('--data-dir', help='keep (and reuse) the written datasets here')
    parser.add_argument('--profile', action='store_true', help='cProfile our side afterwards')
    parser.add_argument('--json', help='also write the results to this file')
    args = parser.parse_args()
    impls = driver.available([i.strip() for i in args.impls.split(',') if i.strip()])
    scratch = tempfile.mkdtemp(prefix='bench-access-')
    data_dir = args.data_dir or os.path.join(scratch, 'data')
    print(f'$ {" ".join([os.path.relpath(sys.executable, driver.ROOT), *sys.argv])}')
    print(f'{driver.load_average()} at start', flush=True)
    servers = driver.Servers(scratch)
    rows: list[dict[str, Any]] = []
    datasets = {}
    try:
        for shards in (int(s) for s in args.shards.split(',')):
            per_shard = -(-args.samples // shards)
            data = datasets[shards] = driver.prepare(data_dir, 'small', args.samples, per_shard, impls,
                                                     tag=f'-{shards}shards')
            written = ', '.join(f'{k} {v:.1f}s' for k, v in data['write_s'].items())
            print(f'{shards:,} shards of {per_shard:,} samples ' + (f'(written in {written})' if written else
                                                                   '(reused)'), flush=True)
            if len(datasets) == 1:
                driver.warm_up(servers, impls, data, 'small', fresh=True)
            rows.append({'shards': shards, 'per_shard': per_shard,
                         'results': summarize(measure(servers, impls, data, shards, args))})
        load = driver.load_average()
        print()
        print_table(rows, impls, args)
        print(f'{load} at end')
        if args.profile and 'ours' in impls:
            print()
            print('Profile of our side (cProfile):')
            for shards, data in datasets.items():
                profile_ours(servers, data, shards, args, scratch)
        if args.json:
            with open(args.json, 'w') as handle:
                json.dump({'args': vars(args), 'rows': rows}, handle, indent=1)
    finally:
        servers.close()
        shutil.rmtree(scratch, ignore_errors=True)


def summarize(results: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, float]]:
    """Medians over rounds of the first-sample time and of each latency percentile."""
    out = {}
    nan = float('nan')
    for impl, runs in results.items():
        out[impl] = {'first_ms': driver.median([r['first_s'] * 1e3 for r in runs['first']]),
                     'init_ms': driver.median([r['init_s'] * 1e3 for r in runs['first']]),
                     **{key: driver.median([r[key] for r in runs['access']]) if runs['access'] else nan
                        for key in ('p50_us', 'p90_us', 'p99_us', 'mean_us')}}
    return out


def _cell(value: float, fmt: str) -> str:
    return '' if value != value else format(value, fmt)


def _times(value: float, ours: float) -> str:
    return '' if value != value or ours != ours or not ours else f'{value / ours:.2f}x'


def print_table(rows: list[dict[str, Any]], impls: list[str], args: argparse.Namespace) -> None:
    """The table: per shard count and implementation, absolute numbers and the others' / ours ratios."""
    table_rows = []
    nan = float('nan')
    for row in rows:
        res = row['results']
        ours = res.get('ours', {})
        for impl in impls:
            r = res[impl]
            mine = impl == 'ours'
            cells = [f'{row["shards"]:,}', impl, _cell(r['first_ms'], '.1f'),
                     '' if mine else _times(r['first_ms'], ours.get('first_ms', nan))]
            if impl in RANDOM_ACCESS:
                cells += [_cell(r[key], '.1f') for key in ('p50_us', 'p90_us', 'p99_us')]
                cells += ['' if mine else _times(r[key], ours.get(key, nan)) for key in ('p50_us', 'p90_us')]
            else:
                cells += ['n/a'] * 3 + ['', '']
            table_rows.append(cells)
    print(f'Time to first sample and random access, {args.samples:,} small samples, {args.count:,} random ids; '
          f'medians of {args.rounds} interleaved rounds, each in a fresh process (impl/ours > 1: ours is faster)')
    print(driver.table(['shards', 'impl', 'first sample ms', 'impl/ours', 'p50 us', 'p90 us', 'p99 us',
                        'p50 impl/ours', 'p90 impl/ours'], table_rows, align='<<'))
    print('webdataset: no random access (tar streams are read in order); n/a above.')


if __name__ == '__main__':
    main()
