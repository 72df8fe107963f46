"""Parquet, warm iteration: streaming-parquet (block-global shuffle, resumable) against pyarrow read directly, same
files, rows as Python dicts in every case.

Data: ``--rows`` rows (default 200k) of a ~200-byte ``text``, an int ``label`` and a 1 KiB ``blob`` in ``--files``
Parquet files (default 8) of ``--row-group`` rows per row group (default 5,000), written once with pyarrow. Each
measurement reads one epoch and checks it holds every row exactly once; rounds are interleaved and the table shows
medians:

* **pyarrow, in order**: ``ParquetFile.iter_batches`` over the files, ``RecordBatch.to_pylist()`` (no shuffle: the
  floor of decoding the same rows to dicts);
* **pyarrow, shuffled in memory**: every file read into one table, ``take`` of a random permutation, then
  ``to_pylist()`` (a global shuffle that holds the whole dataset in memory);
* **ours, shuffled**: ``StreamingDataset(local=dir, shuffle=True)`` in one process, then with ``columns=['text',
  'label']`` (``ParquetStream``), then through ``StreamingDataLoader(num_workers=2)``.

``--hub-files N`` (default 1,000; 0 to skip) also times the first sample of a remote of N small Parquet files on the
loopback Hub (``streaming_hf.testing.HubServer``, ``hf://`` URLs): listing, N footers read with ranged requests,
the derived index, one file downloaded; cold (empty cache) and warm (the derived index cached, a new process's
construction lists the repository again).

Run in ``.venv``::

    .venv/bin/python benchmarks/bench_parquet.py               # 200k rows, 3 rounds, 1,000 Hub files
    .venv/bin/python benchmarks/bench_parquet.py --quick       # 50k rows, 1 round, 200 Hub files
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable


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


def pyarrow_in_order(directory: str) -> int:
    """Every row as a dict, file by file, batch by batch."""
    import pyarrow.parquet as pq
    count = 0
    for name in sorted(os.listdir(directory)):
        handle = pq.ParquetFile(os.path.join(directory, name))
        for batch in handle.iter_batches(batch_size=5000):
            for row in batch.to_pylist():
                count += row['id'] >= 0
    return count


def pyarrow_shuffled(directory: str) -> int:
    """Every row as a dict in a global random order, the whole table in memory."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.concat_tables([pq.read_table(os.path.join(directory, n)) for n in sorted(os.listdir(directory))])
    order = np.random.default_rng(0).permutation(table.num_rows)
    count = 0
    for start in range(0, len(order), 5000):
        for row in table.take(order[start:start + 5000]).to_pylist():
            count += row['id'] >= 0
    return count


def ours(directory: str, cache: str, columns: list[str] | None = None, workers: int = 0) -> int:
    """One shuffled epoch of our dataset (one process, or a DataLoader with ``workers``)."""
    from streaming_core import StreamingDataLoader, StreamingDataset
    from streaming_parquet import ParquetStream
    stream = ParquetStream(local=directory, columns=columns) if columns else None
    kwargs = {'streams': [stream]} if stream is not None else {'local': directory}
    dataset = StreamingDataset(**kwargs, shuffle=True, shuffle_seed=1, batch_size=256)
    count = 0
    if workers:
        loader = StreamingDataLoader(dataset, batch_size=256, num_workers=workers, collate_fn=_batch)
        for batch in loader:
            count += len(batch)
        return count
    for sample in dataset:
        count += sample['label'] >= 0
    return count


def _batch(samples: list) -> list:
    return samples


def hub_first_sample(files: int, root: str) -> tuple[float, float]:
    """Seconds to the first sample of ``files`` files served by the loopback Hub: cold, then warm."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming_core import StreamingDataset
    from streaming_core.storage import clear_backend_cache
    from streaming_hf import backend
    from streaming_hf.testing import HubServer
    hub = HubServer(page_size=1000)
    try:
        contents = {}
        for f in range(files):
            out = io.BytesIO()
            ids = list(range(f * 100, f * 100 + 100))
            pq.write_table(pa.table({'id': ids, 'text': [f'row {i}' for i in ids]}), out)
            contents[f'data/train-{f:05d}-of-{files:05d}.parquet'] = out.getvalue()
        hub.state.repo('datasets', 'bench/many').push(contents)
        os.environ['HF_ENDPOINT'] = hub.url
        times = []
        for _ in range(2):
            clear_backend_cache()
            backend._PINS.clear()
            start = time.perf_counter()
            dataset = StreamingDataset(remote='hf://datasets/bench/many/data', local=os.path.join(root, 'hub-cache'),
                                       batch_size=1)
            assert dataset[0]['id'] == 0 and len(dataset) == files * 100
            times.append(time.perf_counter() - start)
        return times[0], times[1]
    finally:
        hub.close()


def main() -> None:
    """Write the data, run the interleaved rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rows', type=int, default=200_000)
    parser.add_argument('--files', type=int, default=8)
    parser.add_argument('--row-group', type=int, default=5000)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--hub-files', type=int, default=1000)
    parser.add_argument('--quick', action='store_true', help='50k rows, 1 round, 200 Hub files')
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds, args.hub_files = 50_000, 1, min(args.hub_files, 200)
    root = tempfile.mkdtemp(prefix='bench-parquet-')
    os.environ.setdefault('STREAMING_CORE_CACHE_DIR', os.path.join(root, 'cache-root'))
    try:
        data = os.path.join(root, 'data')
        write_files(data, args.rows, args.files, args.row_group)
        size = sum(os.path.getsize(os.path.join(data, n)) for n in os.listdir(data))
        print(f'{args.rows} rows in {args.files} files ({size / 1e6:.1f} MB), row groups of {args.row_group}')
        cases: list[tuple[str, Callable[[], int]]] = [
            ('pyarrow, in order (no shuffle)', lambda: pyarrow_in_order(data)),
            ('pyarrow, shuffled in memory', lambda: pyarrow_shuffled(data)),
            ('ours, shuffled, 1 process', lambda: ours(data, root)),
            ("ours, shuffled, columns=['text','label']", lambda: ours(data, root, ['text', 'label'])),
            ('ours, shuffled, 2 DataLoader workers', lambda: ours(data, root, workers=2)),
        ]
        ours(data, root)  # warm: the derived index and the page cache
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        for r in range(args.rounds):
            for name, run in (cases if r % 2 == 0 else cases[::-1]):
                start = time.perf_counter()
                count = run()
                times[name].append(time.perf_counter() - start)
                assert count == args.rows, (name, count)
        print(f'\n| reader | seconds (median of {args.rounds}) | rows/s |')
        print('|---|---|---|')
        for name, values in times.items():
            median = statistics.median(values)
            print(f'| {name} | {median:.2f} | {args.rows / median:,.0f} |')
        if args.hub_files:
            cold, warm = hub_first_sample(args.hub_files, root)
            print(f'\nFirst sample of {args.hub_files} files on the loopback Hub (hf://): cold {cold:.2f} s, warm '
                  f'{warm:.2f} s')
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
