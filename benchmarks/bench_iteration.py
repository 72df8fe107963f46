"""Warm-cache iteration throughput: streaming-core vs mosaicml-streaming 0.13, litdata 0.2.76, webdataset 1.0.2.

Usage::

    .venv/bin/python benchmarks/bench_iteration.py                  # small (200k) + image (50k), 3 rounds
    .venv/bin/python benchmarks/bench_iteration.py --cases small --rounds 5 --profile
    .venv/bin/python benchmarks/bench_iteration.py --impls ours,floor --workers 0 --data-dir /tmp/bench-data

Data (identical for everyone, written once per run, or reused from ``--data-dir``): a seeded source array, then
each library's native format from it with the same number of samples per shard (``--shard-mb`` of MDS, default
16 MiB): MDS written by our ``MDSWriter`` (read by us and, through a hard-linked copy, by the reference; the two
writers are byte-identical), litdata's ``optimize`` output (``chunk_size`` = that count), webdataset tar shards
(``maxcount`` = that count). 16 MiB rather than the usual 64 MiB: at 64 MiB the 200k small samples fit in one
shard, and webdataset (which splits shards between DataLoader workers) would leave one of two workers idle;
``--shard-mb 64`` measures that layout. Cases: ``small`` = ``{'id': int, 'data': 256 random bytes}``, ``image`` =
``{'id': int, 'image': uint8 32x32x3 ndarray}``.

Each measurement is one epoch through ``torch.utils.data.DataLoader(batch_size=256, num_workers=W,
collate_fn=default_collate)`` in a freshly forked process of that library's interpreter (imports done, files in
the page cache, the dataset constructed outside the clock; ``--fresh``: a new process each time, slower to run);
the clock runs from ``iter(loader)`` to the last batch. Shuffle: py1e for us and the reference (same seed),
litdata's own ``shuffle=True``, webdataset's shard shuffle plus a 1000-sample buffer, one global permutation for
the floor. A run longer than ``--max-seconds`` is stopped there and its rate is what it consumed over that time
(the ``epoch`` column says how much it read). The floor (``peers/impl_floor.py``) reads the same MDS shards
in a minimal Python loop. Rounds are interleaved (every library once per round, the order rotating) and medians
are reported. The first batch of every run is checked against the source, and the ids of every full epoch must
sum to the expected value.

Targets: >= 5x the reference for small samples at ``num_workers=0``; ahead of every peer in every row; within
1.5x of the floor. ``--profile`` then cProfiles our ``num_workers=0`` epochs and prints the hot spots.
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


def parse_list(text: str) -> list[str]:
    """``'a,b'`` -> ``['a', 'b']``."""
    return [part.strip() for part in text.split(',') if part.strip()]


def measure(servers: driver.Servers, impls: list[str], data: dict[str, Any], case: str, shuffle: bool,
            workers: int, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Every implementation ``args.rounds`` times, interleaved (rotating order); returns their results."""
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    for round_ in range(args.rounds):
        order = impls[round_ % len(impls):] + impls[:round_ % len(impls)]
        for impl in order:
            spec = {'task': 'iterate', 'case': case, 'source': data['source'], 'path': data['paths'][impl],
                    'shuffle': shuffle, 'workers': workers, 'batch_size': args.batch_size, 'seed': args.seed,
                    'max_seconds': args.max_seconds}
            result = servers.run(impl, spec, timeout=args.max_seconds * 4 + 120, fresh=args.fresh)
            results[impl].append(result)
            if 'error' not in result:
                print(f'  {case} shuffle={"on" if shuffle else "off"} workers={workers} round {round_ + 1} '
                      f'{impl:10} {result["rate"]:>12,.0f} samples/s', flush=True)
    return results


def summarize(results: dict[str, list[dict[str, Any]]], count: int) -> dict[str, dict[str, Any]]:
    """Median rate, first-batch time and epoch fraction per implementation, with a completeness check."""
    expected = count * (count - 1) // 2
    out = {}
    for impl, runs in results.items():
        good = [r for r in runs if 'error' not in r]
        if not good:
            out[impl] = {'rate': float('nan'), 'error': runs[0].get('error', '?') if runs else 'not run'}
            continue
        full = [r for r in good if r['samples'] >= count]
        check = 'ok'
        if any(r['samples'] > count or (r['samples'] == count and r['id_sum'] != expected) for r in good):
            check = 'WRONG SAMPLES'
        out[impl] = {'rate': driver.median([r['rate'] for r in good]),
                     'first_ms': driver.median([r['first_batch_s'] * 1e3 for r in good]),
                     'epoch': driver.median([min(r['samples'] / count, 1.0) for r in good]),
                     'rounds': len(good), 'full': len(full), 'check': check, 'rates': [r['rate'] for r in good]}
    return out


def main() -> None:
    """Parse arguments, prepare the data, run every row, print the tables and the targets."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--cases', default='small,image')
    parser.add_argument('--small', type=int, default=200_000, help='samples in the small case')
    parser.add_argument('--image', type=int, default=50_000, help='samples in the image case')
    parser.add_argument('--shard-mb', type=float, default=16.0, help='MDS shard size; every format gets its count')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=256)
    parser.add_argument('--workers', default='0,2', help='DataLoader num_workers values')
    parser.add_argument('--shuffle', default='off,on')
    parser.add_argument('--impls', default=','.join(driver.ALL_IMPLS))
    parser.add_argument('--max-seconds', type=float, default=6.0, help='stop a run after this long')
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--data-dir', help='keep (and reuse) the written datasets here')
    parser.add_argument('--profile', action='store_true', help='cProfile our num_workers=0 epochs afterwards')
    parser.add_argument('--fresh', action='store_true',
                        help='run every measurement in a new process instead of a fork of a pre-imported one')
    parser.add_argument('--json', help='also write the results to this file')
    args = parser.parse_args()
    impls = driver.available(parse_list(args.impls))
    cases = parse_list(args.cases)
    workers_list = [int(w) for w in parse_list(args.workers)]
    shuffles = [s in ('on', 'true', '1', 'yes') for s in parse_list(args.shuffle)]
    scratch = tempfile.mkdtemp(prefix='bench-iteration-')
    data_dir = args.data_dir or os.path.join(scratch, 'data')
    print(f'$ {" ".join([os.path.relpath(sys.executable, driver.ROOT), *sys.argv])}')
    print(f'{driver.load_average()} at start', flush=True)
    servers = driver.Servers(scratch)
    rows: list[dict[str, Any]] = []
    try:
        for case in cases:
            count = args.small if case == 'small' else args.image
            per_shard = driver.samples_per_shard_for(case, args.shard_mb)
            data = driver.prepare(data_dir, case, count, per_shard, impls)
            print(f'{case}: {count:,} samples, {data["shards"]} shards of {per_shard:,} samples per format'
                  + (f' (written in {", ".join(f"{k} {v:.1f}s" for k, v in data["write_s"].items())})'
                     if data['write_s'] else ' (reused)'), flush=True)
            driver.warm_up(servers, impls, data, case, fresh=args.fresh)
            for shuffle in shuffles:
                for workers in workers_list:
                    results = measure(servers, impls, data, case, shuffle, workers, args)
                    rows.append({'case': case, 'samples': count, 'shuffle': shuffle, 'workers': workers,
                                 'results': summarize(results, count)})
        load = driver.load_average()
        print()
        print_tables(rows, impls, args)
        print(f'{load} at end')
        if args.profile and 'ours' in impls:
            print()
            print('Profile of our num_workers=0 epochs (cProfile, own time per function):')
            for case in cases:
                count = args.small if case == 'small' else args.image
                data = driver.prepare(data_dir, case, count, driver.samples_per_shard_for(case, args.shard_mb),
                                      impls)
                for shuffle in shuffles:
                    path = os.path.join(scratch, f'profile-{case}-{shuffle}.prof')
                    result = servers.run('ours', {'task': 'iterate', 'case': case, 'source': data['source'],
                                                  'path': data['paths']['ours'], 'shuffle': shuffle, 'workers': 0,
                                                  'batch_size': args.batch_size, 'seed': args.seed,
                                                  'profile': path})
                    if 'error' in result:
                        continue
                    print(f'  {case}, shuffle {"on" if shuffle else "off"}:')
                    driver.print_profile(path)
        if args.json:
            with open(args.json, 'w') as handle:
                json.dump({'args': vars(args), 'rows': rows}, handle, indent=1)
    finally:
        servers.close()
        shutil.rmtree(scratch, ignore_errors=True)


def print_tables(rows: list[dict[str, Any]], impls: list[str], args: argparse.Namespace) -> None:
    """One table per case, then the targets."""
    peers = [impl for impl in impls if impl in driver.PEERS]
    for case in dict.fromkeys(row['case'] for row in rows):
        table_rows = []
        for row in (r for r in rows if r['case'] == case):
            res = row['results']
            ours = res.get('ours', {}).get('rate', float('nan'))
            for impl in impls:
                r = res[impl]
                cells = [row['case'], 'on' if row['shuffle'] else 'off', row['workers'], impl,
                         driver.fmt_rate(r['rate'])]
                if 'error' in r:
                    cells += ['', '', '', r['error'][:60]]
                else:
                    cells += [f'{r["first_ms"]:.0f}', f'{r["epoch"]:.0%}',
                              '' if impl == 'ours' else driver.ratio(ours, r['rate']), r['check']]
                table_rows.append(cells)
        count = next(r['samples'] for r in rows if r['case'] == case)
        print(f'Warm-cache iteration, {case}: {count:,} samples, batch {args.batch_size}, default_collate; medians '
              f'of {args.rounds} interleaved rounds')
        print(driver.table(['case', 'shuffle', 'workers', 'impl', 'samples/s', '1st batch ms', 'epoch',
                            'ours/impl', 'check'], table_rows, align='<<><'))
        print()
    print('Targets:')
    for row in rows:
        res = row['results']
        ours = res.get('ours', {}).get('rate', float('nan'))
        label = f'{row["case"]:5} shuffle {"on " if row["shuffle"] else "off"} workers {row["workers"]}'
        notes = []
        if row['case'] == 'small' and row['workers'] == 0 and 'reference' in res:
            x = ours / res['reference']['rate']
            notes.append(f'{x:.1f}x reference ({"met" if x >= 5 else "MISSED"}, target 5x)')
        behind = [p for p in peers if res[p]['rate'] == res[p]['rate'] and ours <= res[p]['rate']]
        if peers:
            notes.append('ahead of every peer' if not behind else f'BEHIND {", ".join(behind)}')
        if 'floor' in res:
            f = res['floor']['rate'] / ours
            notes.append(f'floor/ours {f:.2f} ({"met" if f <= 1.5 else "MISSED"}, target <= 1.5)')
        print(f'  {label}: {"; ".join(notes)}')


if __name__ == '__main__':
    main()
