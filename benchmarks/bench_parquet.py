"""Parquet, shuffled warm iteration side by side on identical files: streaming-parquet (block-global shuffle) against
Hugging Face ``datasets`` streaming (shuffle buffer) and litdata 0.2.76's Parquet streaming (chunk shuffle), plus our
MDS reader on the same rows converted; and the time to the first sample of a remote of many files on the loopback
Hub (``hf://``).

Data: ``--rows`` rows (default 200k) of an ``id``, a ~200-byte ``text``, an int ``label`` and a 1 KiB ``blob`` in
``--files`` Parquet files (default 8) of ``--row-group`` rows per row group (default 5,000), written once with
pyarrow; the same rows written by our ``MDSWriter``; litdata reads a hard-linked copy of the files (its
``index_parquet_dataset`` writes an ``index.json`` next to them, which would make the directory a litdata dataset
for us).

Every measurement is one shuffled epoch in a fresh process that imported its library before the clock, through the
same loop: ``DataLoader(dataset, batch_size=256, num_workers=W, collate_fn=<list of the samples>)`` (litdata's own
``StreamingDataLoader``), the clock from ``iter(loader)`` to the last batch; every epoch must hold each id exactly
once. An epoch still running after ``--max-seconds`` (default 30) is stopped there, its rate is what it read by
then (the ``epoch read`` column) and it must hold no id twice. Rows come out as dicts of ``str``/``int``/``bytes``
everywhere.

* **ours**: ``StreamingDataset(local=<parquet dir>, shuffle=True)`` (also with ``columns=['id', 'text', 'label']``);
* **HF datasets**: ``load_dataset('parquet', data_files=..., split='train', streaming=True).shuffle(seed,
  buffer_size=--hf-buffer)`` (a file-order shuffle plus a buffer; with W workers the files are split between them);
* **litdata**: ``index_parquet_dataset(dir)`` once, then ``StreamingDataset(dir, item_loader=ParquetLoader(),
  shuffle=True)`` (a chunk-order shuffle plus a permutation inside the chunks each worker holds); with workers,
  ``multiprocessing_context='spawn'``, which its ``StreamingDataLoader`` demands for the ParquetLoader (polars'
  thread pool and ``fork`` can deadlock), so its workers import their libraries inside the clock;
* **ours (MDS)**: the same rows as MDS shards of about the Parquet files' row count;
* **pyarrow floors** (1 process): ``iter_batches`` + ``to_pylist`` in order, and a global ``take`` of a permutation
  of the whole table held in memory.

``--hub-files N`` (default 1,000; 0 skips): N small Parquet files in ``data/`` of a repository on the loopback Hub
(``streaming_hf.testing.HubServer``, started here); each library, in a new process with ``HF_ENDPOINT`` pointing at
it, times construction to the first sample, cold (empty caches) then warm (a second process on the same caches),
``--hub-rounds`` times (medians, default 3);
``--hub-latency S`` makes the server wait S seconds before each answer, standing for a network's round trip.
What each library does before its first sample differs: we list the repository and read
every file's footer (ranged reads) to derive the index the shuffles and resumption need; litdata indexes every
file too (``index_parquet_dataset`` through ``HfFileSystem``); Hugging Face ``datasets`` lists the files and opens
the first one. The last row, *ours, with a sidecar*, pushes the sidecar index ``streaming index`` writes
(``data/parquet-index.json``) to the repository first: one read instead of 1,000 footers.

The peers run in the side virtualenv ``.venv-hf`` (``benchmarks/setup_hf_venv.sh``: datasets 5.x needs
huggingface-hub 2.x, which ``.venv-ref`` cannot take); without it only our rows are measured. Run in ``.venv``::

    .venv/bin/python benchmarks/bench_parquet.py               # 200k rows, 3 rounds, workers 0 and 2, 1,000 Hub files
    .venv/bin/python benchmarks/bench_parquet.py --quick       # 50k rows, 1 round, 200 Hub files
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
HF_PYTHON = os.path.join(os.path.dirname(HERE), '.venv-hf', 'bin', 'python')
BATCH = 256
#: Where every measured process caches its bytecode (as the other benchmarks do).
PYCACHE = os.path.join(tempfile.gettempdir(), 'streaming-core-bench-pycache')
#: Which interpreter runs which implementation.
PEERS = {'ours': sys.executable, 'ours (MDS)': sys.executable, 'ours, with a sidecar': sys.executable,
         'pyarrow': sys.executable,
         'HF datasets': HF_PYTHON, 'litdata': HF_PYTHON}


def _batch(samples: list[Any]) -> list[Any]:
    return samples


# ------------------------------------------------------------------------------------------------------------ data
def write_files(directory: str, rows: int, files: int, row_group: int) -> None:
    """Write the dataset (deterministic content)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(0)
    blob = rng.randbytes(1 << 21)  # slices of random bytes: incompressible 1 KiB values
    words = [''.join(rng.choice('abcdefghij') for _ in range(7)) for _ in range(500)]
    per = rows // files
    for f in range(files):
        ids = range(f * per, rows if f == files - 1 else (f + 1) * per)
        table = pa.table({
            'id': pa.array(list(ids), pa.int64()),
            'text': pa.array([' '.join(words[(i * 7 + k) % 500] for k in range(25)) for i in ids], pa.string()),
            'label': pa.array([i % 1000 for i in ids], pa.int64()),
            'blob': pa.array([blob[i * 1031 % 2096128:i * 1031 % 2096128 + 1024] for i in ids], pa.binary()),
        })
        pq.write_table(table, os.path.join(directory, f'train-{f:05d}-of-{files:05d}.parquet'),
                       row_group_size=row_group)


def write_mds(source: str, out: str, per_shard: int) -> None:
    """The same rows as MDS shards of about ``per_shard`` rows (our ``MDSWriter``)."""
    import pyarrow.parquet as pq

    from streaming_core import MDSWriter
    columns = {'id': 'int64', 'text': 'str', 'label': 'int64', 'blob': 'bytes'}
    with MDSWriter(out=out, columns=columns, size_limit=per_shard * 1300) as writer:
        for name in sorted(os.listdir(source)):
            for batch in pq.ParquetFile(os.path.join(source, name)).iter_batches(batch_size=5000):
                for row in batch.to_pylist():
                    writer.write(row)


def write_hub_files(files: int) -> dict[str, bytes]:
    """``files`` small Parquet files (100 rows each) for the loopback Hub, by path in the repository."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    contents = {}
    for f in range(files):
        out = io.BytesIO()
        ids = list(range(f * 100, f * 100 + 100))
        pq.write_table(pa.table({'id': ids, 'text': [f'row {i}' for i in ids]}), out)
        contents[f'data/train-{f:05d}-of-{files:05d}.parquet'] = out.getvalue()
    return contents


def hub_sidecar(contents: dict[str, bytes], root: str) -> bytes:
    """The Parquet sidecar index (``streaming index``) of the Hub files under ``data/``, written from a local copy."""
    from streaming_core.tools.commands.index import write_sidecar
    local = os.path.join(root, 'hub-sidecar')
    for name, data in contents.items():
        os.makedirs(os.path.dirname(os.path.join(local, name)), exist_ok=True)
        with open(os.path.join(local, name), 'wb') as handle:
            handle.write(data)
    written = write_sidecar(os.path.join(local, 'data'))['sidecar']
    with open(written, 'rb') as handle:
        return handle.read()


# ------------------------------------------------------------------------------------------------- measured tasks
def _loader_epoch(loader: Any, max_seconds: float) -> dict[str, Any]:
    """Iterate ``loader`` to its end, or until ``max_seconds`` have passed (0: no limit)."""
    started = time.perf_counter()
    ids: list[int] = []
    for batch in loader:
        ids.extend(sample['id'] for sample in batch)
        if max_seconds and time.perf_counter() - started > max_seconds:
            break
    return {'seconds': time.perf_counter() - started, 'ids': len(ids), 'distinct': len(set(ids))}


def task_iterate(spec: dict[str, Any]) -> dict[str, Any]:
    """One shuffled epoch of ``spec['impl']`` (run in that implementation's interpreter)."""
    impl, workers, seed, directory = spec['impl'], spec['workers'], spec['seed'], spec['dir']
    if impl == 'litdata':
        import litdata
        from litdata.streaming.item_loader import ParquetLoader
        dataset = litdata.StreamingDataset(directory, item_loader=ParquetLoader(), shuffle=True, seed=seed)
        # litdata refuses 'fork' with its ParquetLoader (polars' thread pool could deadlock) and asks for 'spawn'.
        context = {'multiprocessing_context': 'spawn'} if workers else {}
        loader = litdata.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers, collate_fn=_batch,
                                             **context)
        return _loader_epoch(loader, spec['max_seconds'])
    from torch.utils.data import DataLoader
    if impl == 'HF datasets':
        import datasets
        datasets.disable_progress_bars()
        files = sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith('.parquet'))
        dataset = datasets.load_dataset('parquet', data_files=files, split='train', streaming=True)
        dataset = dataset.shuffle(seed=seed, buffer_size=spec['buffer'])
    elif impl == 'pyarrow':
        return pyarrow_floor(directory, spec['order'])
    else:
        from streaming_core import StreamingDataset
        dataset = StreamingDataset(local=directory, batch_size=BATCH, shuffle=True, shuffle_seed=seed,
                                   **({'columns': spec['columns']} if spec.get('columns') else {}))
    return _loader_epoch(DataLoader(dataset, batch_size=BATCH, num_workers=workers, collate_fn=_batch),
                         spec['max_seconds'])


def pyarrow_floor(directory: str, order: str) -> dict[str, Any]:
    """Every row as a dict with pyarrow directly: in file order, or a global permutation of the whole table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    names = sorted(n for n in os.listdir(directory) if n.endswith('.parquet'))
    started = time.perf_counter()
    ids = []
    if order == 'in order':
        for name in names:
            for batch in pq.ParquetFile(os.path.join(directory, name)).iter_batches(batch_size=5000):
                ids.extend(row['id'] for row in batch.to_pylist())
    else:
        table = pa.concat_tables([pq.read_table(os.path.join(directory, n)) for n in names])
        permutation = np.random.default_rng(0).permutation(table.num_rows)
        for start in range(0, len(permutation), 5000):
            ids.extend(row['id'] for row in table.take(permutation[start:start + 5000]).to_pylist())
    return {'seconds': time.perf_counter() - started, 'ids': len(ids), 'distinct': len(set(ids))}


def task_first_sample(spec: dict[str, Any]) -> dict[str, Any]:
    """Construction to the first sample of the Hub repository ``bench/many`` (``HF_ENDPOINT`` is set). Every library
    runs ``gc.collect()`` after its imports, before its clock: importing torch leaves a full collection pending, which
    otherwise lands in whichever timed window allocates enough (as in ``bench_startup.py``)."""
    impl, url = spec['impl'], 'hf://datasets/bench/many/data'
    if impl.startswith('ours'):
        # Imported before the clock, as the peers' imports (datasets, litdata) import theirs, huggingface_hub and
        # pyarrow included: our hf:// backend imports huggingface_hub lazily for its token lookup (about 0.16 s), our
        # Parquet reader pyarrow.parquet when it opens the first file.
        import pyarrow.parquet  # noqa: F401
        from huggingface_hub import get_token  # noqa: F401

        import streaming_hf  # noqa: F401
        import streaming_parquet  # noqa: F401
        from streaming_core import StreamingDataset
        gc.collect()
        started = time.perf_counter()
        first = next(iter(StreamingDataset(remote=url, local=spec['cache'], batch_size=1)))
    elif impl == 'HF datasets':
        import datasets
        datasets.disable_progress_bars()
        gc.collect()
        started = time.perf_counter()
        dataset = datasets.load_dataset('parquet', data_files=f'{url}/*.parquet', split='train', streaming=True)
        first = next(iter(dataset))
    else:
        import litdata
        from litdata.streaming.item_loader import ParquetLoader
        gc.collect()
        started = time.perf_counter()
        dataset = litdata.StreamingDataset(url, item_loader=ParquetLoader(), cache_dir=spec['cache'])
        first = dataset[0]
    seconds = time.perf_counter() - started
    if first['id'] != 0:
        raise AssertionError(f'{impl}: the first sample has id {first["id"]}, expected 0')
    return {'seconds': seconds}


def peer_main(spec: dict[str, Any]) -> None:
    """Entry point of a measured process: print the task's JSON answer last."""
    import logging
    import warnings
    warnings.simplefilter('ignore')
    logging.disable(logging.WARNING)
    import torch.utils.data  # noqa: F401  (every measured process imports torch before its clock)
    if spec['impl'] in ('HF datasets', 'litdata'):
        import datasets  # noqa: F401
        import litdata  # noqa: F401
    else:
        import streaming_parquet  # noqa: F401
        from streaming_core import StreamingDataset  # noqa: F401
    if spec['task'] == 'index-litdata':
        from litdata import index_parquet_dataset
        index_parquet_dataset(spec['dir'], num_workers=1)
        answer: dict[str, Any] = {'ok': True}
    elif spec['task'] == 'iterate':
        answer = task_iterate(spec)
    else:
        answer = task_first_sample(spec)
    sys.stdout.flush()
    print('\n' + json.dumps(answer))


# ------------------------------------------------------------------------------------------------------- driver
def run(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``spec`` in a fresh process of its implementation's interpreter; its JSON answer."""
    python = PEERS[spec['impl']]
    full_env = dict(os.environ, PYTHONWARNINGS='ignore', **(env or {}))
    done = subprocess.run([python, os.path.abspath(__file__), '--peer', json.dumps(spec)], capture_output=True,
                          text=True, env=full_env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f'{spec["impl"]} ({python}) failed on {spec["task"]}:\n{done.stderr[-3000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


def _reexec_with_bytecode() -> None:
    """Run again with bytecode caching on, in ``PYCACHE``, so no measured process compiles from source."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def iteration_cases(args: argparse.Namespace, dirs: dict[str, str], peers: bool) -> list[tuple[str, dict]]:
    """``(row name, spec)`` for every measured row."""
    cases: list[tuple[str, dict]] = []
    for workers in args.workers:
        cases.append((f'ours | {workers}', {'impl': 'ours', 'dir': dirs['parquet'], 'workers': workers}))
        if peers:
            cases.append((f'HF datasets | {workers}', {'impl': 'HF datasets', 'dir': dirs['parquet'],
                                                       'workers': workers, 'buffer': args.hf_buffer}))
            cases.append((f'litdata | {workers}', {'impl': 'litdata', 'dir': dirs['litdata'], 'workers': workers}))
        cases.append((f'ours (MDS) | {workers}', {'impl': 'ours (MDS)', 'dir': dirs['mds'], 'workers': workers}))
    cases.append(("ours, columns=['id','text','label'] | 0",
                  {'impl': 'ours', 'dir': dirs['parquet'], 'workers': 0, 'columns': ['id', 'text', 'label']}))
    for order in ('in order', 'global take'):
        cases.append((f'pyarrow {order} (no DataLoader) | 0', {'impl': 'pyarrow', 'dir': dirs['parquet'],
                                                               'workers': 0, 'order': order}))
    return cases


def hub_first_sample(args: argparse.Namespace, root: str, peers: bool) -> dict[str, list[str]]:
    """Cold and warm first-sample seconds per library on the loopback Hub (a reason instead where one fails)."""
    from streaming_hf.testing import HubServer
    hub = HubServer(page_size=1000, latency=args.hub_latency)
    results: dict[str, list[str]] = {}
    try:
        contents = write_hub_files(args.hub_files)
        hub.state.repo('datasets', 'bench/many').push(contents)
        env = {'HF_ENDPOINT': hub.url, 'HF_HOME': os.path.join(root, 'hf-home'), 'HF_HUB_DISABLE_TELEMETRY': '1',
               'STREAMING_CORE_CACHE_DIR': os.path.join(root, 'hub-core-cache')}
        for impl in ['ours'] + (['HF datasets', 'litdata'] if peers else []) + ['ours, with a sidecar']:
            if impl == 'ours, with a sidecar':
                hub.state.repo('datasets', 'bench/many').push({'data/parquet-index.json': hub_sidecar(contents, root)})
            cache = os.path.join(root, f'hub-{impl.replace(" ", "-").replace(",", "")}')
            times: dict[str, list[float]] = {'cold': [], 'warm': []}
            failed: dict[str, str] = {}
            for _ in range(args.hub_rounds):
                for state in (cache, env['HF_HOME'], env['STREAMING_CORE_CACHE_DIR']):  # cold: nothing kept
                    shutil.rmtree(state, ignore_errors=True)
                for when in ('cold', 'warm'):
                    try:
                        times[when].append(run({'task': 'first', 'impl': impl, 'cache': cache}, env)['seconds'])
                    except (RuntimeError, subprocess.TimeoutExpired) as err:
                        last = [line for line in str(err).splitlines() if line.strip()][-1]
                        failed[when] = f'failed: {last[:160]}'
            results[impl] = [f'{statistics.median(times[when]):.3f}' if times[when] else failed[when]
                             for when in ('cold', 'warm')]
    finally:
        hub.close()
    return results


def prepare(args: argparse.Namespace, dirs: dict[str, str], peers: bool) -> None:
    """Write what is missing: the Parquet files, their MDS copy, litdata's indexed hard-linked copy."""
    if not os.path.isdir(dirs['parquet']):
        write_files(dirs['parquet'], args.rows, args.files, args.row_group)
    if not os.path.exists(os.path.join(dirs['mds'], 'index.json')):
        write_mds(dirs['parquet'], dirs['mds'], args.rows // args.files)
    if peers and not os.path.exists(os.path.join(dirs['litdata'], 'index.json')):
        os.makedirs(dirs['litdata'], exist_ok=True)
        for name in os.listdir(dirs['parquet']):
            os.link(os.path.join(dirs['parquet'], name), os.path.join(dirs['litdata'], name))
        run({'task': 'index-litdata', 'impl': 'litdata', 'dir': dirs['litdata']})
    size = sum(os.path.getsize(os.path.join(dirs['parquet'], n)) for n in os.listdir(dirs['parquet']))
    print(f'{args.rows} rows in {args.files} Parquet files ({size / 1e6:.0f} MB), row groups of {args.row_group}',
          flush=True)


def main() -> None:
    """Parse the options, write the data, measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--rows', type=int, default=200_000)
    parser.add_argument('--files', type=int, default=8)
    parser.add_argument('--row-group', type=int, default=5000)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--workers', default='0,2', help='DataLoader workers, comma-separated')
    parser.add_argument('--hf-buffer', type=int, default=10_000, help="HF datasets' shuffle buffer")
    parser.add_argument('--hub-files', type=int, default=1000)
    parser.add_argument('--hub-rounds', type=int, default=3, help='cold + warm runs per library (medians)')
    parser.add_argument('--hub-latency', type=float, default=0.0,
                        help='seconds the loopback Hub waits before each answer (a network round trip)')
    parser.add_argument('--max-seconds', type=float, default=30.0,
                        help='stop an epoch after this long; its rate is what it read by then (0: no limit)')
    parser.add_argument('--data-dir', default=None, help='keep the data here (default: a temporary directory)')
    parser.add_argument('--quick', action='store_true', help='50k rows, 1 round, 200 Hub files')
    parser.add_argument('--hub-only', action='store_true', help='only the first-sample table')
    parser.add_argument('--peer', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer_main(json.loads(args.peer))
        return
    if os.environ.get('PYTHONDONTWRITEBYTECODE') or os.environ.get('PYTHONPYCACHEPREFIX') != PYCACHE:
        _reexec_with_bytecode()
    if args.quick:
        args.rows, args.rounds, args.hub_files, args.hub_rounds = 50_000, 1, min(args.hub_files, 200), 1
    args.workers = [int(w) for w in args.workers.split(',')]
    peers = os.path.exists(HF_PYTHON)
    print(f'bench_parquet: {" ".join(sys.argv[1:]) or "(defaults)"}: {args.rows} rows in {args.files} files, '
          f'{args.rounds} round(s), load {os.getloadavg()[0]:.2f}', flush=True)
    if not peers:
        print(f'bench_parquet: {HF_PYTHON} is missing: only our rows are measured (build it with '
              f'benchmarks/setup_hf_venv.sh)', flush=True)
    root = args.data_dir or tempfile.mkdtemp(prefix='bench-parquet-')
    os.environ['STREAMING_CORE_CACHE_DIR'] = os.path.join(root, 'core-cache')
    os.environ['DATA_OPTIMIZER_CACHE_FOLDER'] = os.path.join(root, 'litdata-cache')
    dirs = {name: os.path.join(root, name) for name in ('parquet', 'litdata', 'mds')}
    try:
        if not args.hub_only:
            prepare(args, dirs, peers)
        cases = [] if args.hub_only else iteration_cases(args, dirs, peers)
        for _, spec in cases:  # unrecorded warm-up: our derived index, litdata's and the page cache
            if spec['workers'] == 0:
                run({**spec, 'task': 'iterate', 'seed': 0, 'max_seconds': args.max_seconds})
        rates: dict[str, list[float]] = {name: [] for name, _ in cases}
        read: dict[str, list[float]] = {name: [] for name, _ in cases}
        for r in range(args.rounds if cases else 0):
            shift = r % len(cases)
            for name, spec in cases[shift:] + cases[:shift]:
                answer = run({**spec, 'task': 'iterate', 'seed': r + 1, 'max_seconds': args.max_seconds})
                partial = answer['ids'] < args.rows and args.max_seconds and answer['seconds'] > args.max_seconds
                if answer['distinct'] != answer['ids'] or (answer['ids'] != args.rows and not partial):
                    raise AssertionError(f'{name}: {answer["ids"]} rows, {answer["distinct"]} distinct, expected '
                                         f'{args.rows} (each once)')
                rates[name].append(answer['ids'] / answer['seconds'])
                read[name].append(answer['ids'] / args.rows)
        if cases:
            print(f'\nShuffled warm iteration, rows/s (median of {args.rounds}), load {os.getloadavg()[0]:.2f}:\n')
            print('| reader | workers | shuffle | rows/s | epoch read | ours / this |')
            print('| --- | ---: | --- | ---: | ---: | ---: |')
        shuffles = {'ours': 'block-global', 'HF datasets': f'files + buffer of {args.hf_buffer:,}',
                    'litdata': 'chunks + within chunk', 'ours (MDS)': 'block-global', 'pyarrow in': 'none',
                    'pyarrow global': 'global, in memory', "ours, columns=['id','text','label']": 'block-global'}
        for name, values in rates.items():
            impl, workers = name.split(' | ')
            rate = statistics.median(values)
            base = statistics.median(rates[f'ours | {workers}'])
            kind = next(v for k, v in shuffles.items() if impl.startswith(k))
            print(f'| {impl} | {workers} | {kind} | {rate:,.0f} | {statistics.median(read[name]):.0%} | '
                  f'{base / rate:.2f}x |', flush=True)
        if args.hub_files:
            results = hub_first_sample(args, root, peers)
            print(f'\nFirst sample of {args.hub_files:,} files (100 rows each) on the loopback Hub (hf://, '
                  f'{args.hub_latency * 1000:.0f} ms per answer), seconds from construction, new process, medians of '
                  f'{args.hub_rounds} round(s):\n')
            print('| library | cold | warm |')
            print('| --- | ---: | ---: |')
            for impl, (cold, warm) in results.items():
                print(f'| {impl} | {cold} | {warm} |')
        print(f'\nload at the end {os.getloadavg()[0]:.2f}')
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
