"""Cold-cache throughput from a loopback S3 server (moto) behind a proxy that adds latency to every request.

Usage::

    .venv/bin/python benchmarks/bench_cold_s3.py                       # small case, 30 ms per request, 3 rounds
    .venv/bin/python benchmarks/bench_cold_s3.py --delay 0.05 --shard-mb 4 --workers 0,2 --shuffle off,on

Set-up: moto's S3 server (``python -m moto.server``) on loopback; ``peers/latency_proxy.py`` in front of it adds
``--delay`` seconds to every request (and ``--mbps`` caps each response, if given); every library talks to the
proxy. The same data as ``bench_iteration.py`` (a seeded source, each library's native format with the same samples
per shard) is uploaded once (directly to moto) under ``s3://bench/<case>/<format>/``.

Each measurement starts from an empty local cache directory in a freshly forked process of that library's
interpreter, constructs the dataset (which fetches the index: counted) and iterates one epoch through a
DataLoader (batch 256, ``default_collate``). The rate is samples / (construction + epoch); ``1st batch`` counts
from construction too. Runs longer than ``--max-seconds`` stop there (the ``epoch`` column). The proxy counts the
requests and bytes each run made.

* us: ``storage_options={'endpoint_url': proxy, ...}``; the reference: ``S3_ENDPOINT_URL`` (its documented way);
* litdata: ``storage_options`` with ``endpoint_url`` (its S3 client; ``cache_dir`` = the empty directory);
* webdataset: no S3 client of its own; it reads ``http://`` URLs through ``curl`` (its ``gopen``), so it gets
  the objects' path-style URLs on the same proxy (moto serves unsigned GETs), streaming each tar as it arrives.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

try:
    from benchmarks.peers import driver
except ImportError:  # run as a script: benchmarks/ is on sys.path
    from peers import driver

BUCKET = 'bench'
CREDENTIALS = {'AWS_ACCESS_KEY_ID': 'testing', 'AWS_SECRET_ACCESS_KEY': 'testing', 'AWS_DEFAULT_REGION': 'us-east-1'}
COLD_IMPLS = ('ours', 'reference', 'litdata', 'webdataset')


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def start_moto(log_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """moto's server on a free port (waits until it accepts connections)."""
    port = free_port()
    log = open(os.path.join(log_dir, 'moto.log'), 'wb')
    process = subprocess.Popen([sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(port)],
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f'moto exited with {process.returncode}; see {log.name}')
        try:
            with socket.create_connection(('127.0.0.1', port), timeout=0.5):
                return process, f'http://127.0.0.1:{port}'
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError('moto did not start within 60 s')


def start_proxy(upstream: str, delay: float, mbps: float | None) -> tuple[subprocess.Popen[str], str]:
    """``peers/latency_proxy.py`` in front of ``upstream``."""
    args = [sys.executable, os.path.join(driver.HERE, 'latency_proxy.py'), '--upstream', upstream, '--delay',
            str(delay)]
    if mbps:
        args += ['--mbps', str(mbps)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith('PORT '):
        process.kill()
        raise RuntimeError(f'latency proxy did not start: {line!r}')
    return process, f'http://127.0.0.1:{line.split()[1]}'


def proxy_stats(proxy: str) -> dict[str, int]:
    """Requests and bytes through the proxy since the last call."""
    with urllib.request.urlopen(f'{proxy}/__proxy_stats', timeout=10) as response:
        return json.loads(response.read())


def upload(endpoint: str, local_dir: str, prefix: str) -> int:
    """Upload every file under ``local_dir`` to ``s3://bench/<prefix>/`` (directly to moto); returns the bytes."""
    import boto3
    client = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id='testing', aws_secret_access_key='testing',
                          region_name='us-east-1')
    try:
        client.create_bucket(Bucket=BUCKET)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    total = 0
    for root, _, files in os.walk(local_dir):
        for name in sorted(files):
            path = os.path.join(root, name)
            key = f'{prefix}/{os.path.relpath(path, local_dir)}'
            client.upload_file(path, BUCKET, key)
            total += os.path.getsize(path)
    return total


def measure(servers: driver.Servers, impls: list[str], data: dict[str, Any], remotes: dict[str, str],
            proxy: str, case: str, shuffle: bool, workers: int, args: argparse.Namespace,
            scratch: str) -> dict[str, list[dict[str, Any]]]:
    """Every implementation ``args.rounds`` times (rotating order), each from an empty cache."""
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    shard_names = sorted(os.listdir(data['paths']['webdataset'])) if 'webdataset' in impls else []
    for round_ in range(args.rounds):
        for impl in impls[round_ % len(impls):] + impls[:round_ % len(impls)]:
            cache = tempfile.mkdtemp(prefix=f'cold-{impl}-', dir=scratch)
            if impl == 'ours':  # our dataset wants a missing or empty directory of its own
                os.rmdir(cache)
            spec = {'task': 'iterate', 'case': case, 'source': data['source'], 'path': cache, 'shuffle': shuffle,
                    'workers': workers, 'batch_size': args.batch_size, 'seed': args.seed,
                    'max_seconds': args.max_seconds, 'remote': remotes[impl], 'endpoint': proxy}
            if impl == 'webdataset':
                spec['shards'] = [name for name in shard_names if name.endswith('.tar')]
            proxy_stats(proxy)
            result = servers.run(impl, spec, timeout=args.max_seconds * 4 + 180)
            traffic = proxy_stats(proxy)
            shutil.rmtree(cache, ignore_errors=True)
            if 'error' in result:
                results[impl].append(result)
                continue
            total = result['init_s'] + result['seconds']
            result.update(cold_rate=result['samples'] / total, cold_first_s=result['init_s'] + result['first_batch_s'],
                          requests=traffic['requests'], mbytes=traffic['bytes'] / 1e6)
            results[impl].append(result)
            print(f'  {case} shuffle={"on" if shuffle else "off"} workers={workers} round {round_ + 1} {impl:10} '
                  f'{result["cold_rate"]:>10,.0f} samples/s  first batch {result["cold_first_s"] * 1e3:6.0f} ms  '
                  f'{traffic["requests"]:4d} requests  {traffic["bytes"] / 1e6:7.1f} MB', flush=True)
    return results


def summarize(results: dict[str, list[dict[str, Any]]], count: int) -> dict[str, dict[str, Any]]:
    """Medians per implementation."""
    out = {}
    for impl, runs in results.items():
        good = [r for r in runs if 'error' not in r]
        if not good:
            out[impl] = {'rate': float('nan'), 'error': runs[0].get('error', '?') if runs else 'not run'}
            continue
        out[impl] = {'rate': driver.median([r['cold_rate'] for r in good]),
                     'first_ms': driver.median([r['cold_first_s'] * 1e3 for r in good]),
                     'epoch': driver.median([min(r['samples'] / count, 1.0) for r in good]),
                     'requests': driver.median([r['requests'] for r in good]),
                     'mbytes': driver.median([r['mbytes'] for r in good])}
    return out


def main() -> None:
    """Parse arguments, start the servers, upload, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--cases', default='small')
    parser.add_argument('--small', type=int, default=200_000)
    parser.add_argument('--image', type=int, default=50_000)
    parser.add_argument('--shard-mb', type=float, default=16.0)
    parser.add_argument('--delay', type=float, default=0.03, help='seconds the proxy adds to every request')
    parser.add_argument('--mbps', type=float, help='cap each response at this rate (megabits/s)')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=256)
    parser.add_argument('--workers', default='0,2')
    parser.add_argument('--shuffle', default='on')
    parser.add_argument('--impls', default=','.join(COLD_IMPLS))
    parser.add_argument('--max-seconds', type=float, default=8.0)
    parser.add_argument('--seed', type=int, default=7)
    parser.add_argument('--data-dir', help='keep (and reuse) the written datasets here')
    parser.add_argument('--json', help='also write the results to this file')
    args = parser.parse_args()
    impls = driver.available([i.strip() for i in args.impls.split(',') if i.strip() in COLD_IMPLS])
    scratch = tempfile.mkdtemp(prefix='bench-cold-')
    data_dir = args.data_dir or os.path.join(scratch, 'data')
    print(f'$ {" ".join([os.path.relpath(sys.executable, driver.ROOT), *sys.argv])}')
    print(f'{driver.load_average()} at start', flush=True)
    os.environ.update(CREDENTIALS)
    servers = driver.Servers(scratch)
    moto, moto_url = start_moto(scratch)
    proxy, proxy_url = start_proxy(moto_url, args.delay, args.mbps)
    rows = []
    try:
        for case in (c.strip() for c in args.cases.split(',') if c.strip()):
            count = args.small if case == 'small' else args.image
            per_shard = driver.samples_per_shard_for(case, args.shard_mb)
            data = driver.prepare(data_dir, case, count, per_shard, impls)
            driver.warm_up(servers, impls, data, case, fresh=False)
            remotes = {}
            sizes = []
            for fmt in sorted({driver.FORMAT_DIR[i] for i in impls}):
                key = 'mds' if fmt == 'mds-ref' else fmt
                if key not in sizes:
                    size = upload(moto_url, os.path.join(data['dir'], key), f'{case}/{key}')
                    sizes.append(key)
                    print(f'{case}: uploaded {key} ({size / 1e6:.1f} MB, {data["shards"]} shards)', flush=True)
            for impl in impls:
                key = 'mds' if driver.FORMAT_DIR[impl].startswith('mds') else driver.FORMAT_DIR[impl]
                remotes[impl] = f's3://{BUCKET}/{case}/{key}'
            for shuffle in (s.strip() in ('on', 'true', '1') for s in args.shuffle.split(',')):
                for workers in (int(w) for w in args.workers.split(',')):
                    results = measure(servers, impls, data, remotes, proxy_url, case, shuffle, workers, args, scratch)
                    rows.append({'case': case, 'samples': count, 'shuffle': shuffle, 'workers': workers,
                                 'results': summarize(results, count)})
        load = driver.load_average()
        print()
        print_table(rows, impls, args)
        print(f'{load} at end')
        if args.json:
            with open(args.json, 'w') as handle:
                json.dump({'args': vars(args), 'rows': rows}, handle, indent=1)
    finally:
        servers.close()
        proxy.kill()
        moto.terminate()
        moto.wait(timeout=30)
        shutil.rmtree(scratch, ignore_errors=True)


def print_table(rows: list[dict[str, Any]], impls: list[str], args: argparse.Namespace) -> None:
    """One table with every row."""
    table_rows = []
    for row in rows:
        res = row['results']
        ours = res.get('ours', {}).get('rate', float('nan'))
        for impl in impls:
            r = res[impl]
            cells = [row['case'], 'on' if row['shuffle'] else 'off', row['workers'], impl, driver.fmt_rate(r['rate'])]
            if 'error' in r:
                cells += ['', '', '', '', r['error'][:60]]
            else:
                cells += [f'{r["first_ms"]:.0f}', f'{r["epoch"]:.0%}', f'{r["requests"]:.0f}', f'{r["mbytes"]:.0f}',
                          '' if impl == 'ours' else driver.ratio(ours, r['rate'])]
            table_rows.append(cells)
    print(f'Cold-cache iteration from moto S3 behind a {args.delay * 1e3:.0f} ms-per-request proxy'
          + (f' capped at {args.mbps:g} Mbit/s' if args.mbps else '') +
          f'; batch {args.batch_size}; medians of {args.rounds} interleaved rounds')
    print(driver.table(['case', 'shuffle', 'workers', 'impl', 'samples/s', '1st batch ms', 'epoch', 'requests',
                        'MB', 'ours/impl'], table_rows, align='<<><'))


if __name__ == '__main__':
    main()
