"""WebDataset tars, shuffled warm iteration: streaming-webdataset (block-global shuffle) against the webdataset
library 1.0.2 (shard shuffle plus its shuffle buffer), same tars, same DataLoader loop.

Data: ``--samples`` samples (default 100k) of a ``--payload``-byte JPEG-like field plus a ``.cls`` label in
``--tars`` tars (default 16), written once with ``webdataset.TarWriter``. Each measurement runs one shuffled epoch
through ``DataLoader(batch_size=256, num_workers=W, collate_fn=list-of-samples)`` and checks that the epoch holds
every sample exactly once. Rounds are interleaved (ours, then theirs, the order alternating) and the table shows
medians. Run in ``.venv`` (webdataset is in requirements-dev)::

    .venv/bin/python benchmarks/bench_webdataset.py                 # 100k samples, 3 rounds, workers 0 and 2
    .venv/bin/python benchmarks/bench_webdataset.py --quick         # 20k samples, 1 round
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from typing import Any


def _batch(samples: list[Any]) -> list[Any]:
    return samples


def write_tars(directory: str, samples: int, tars: int, payload: int) -> list[str]:
    """Write the tars with webdataset's TarWriter; return their paths."""
    import random

    import webdataset as wds
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(0)
    blob = bytes(rng.getrandbits(8) for _ in range(payload + 256))
    paths = []
    for t in range(tars):
        path = os.path.join(directory, f'train-{t:04d}.tar')
        with wds.TarWriter(path) as sink:
            for i in range(samples * t // tars, samples * (t + 1) // tars):
                sink.write({'__key__': f'{i:08d}', 'jpg': b'\xff\xd8\xff' + blob[i % 256:i % 256 + payload - 3],
                            'cls': i % 1000})
        paths.append(path)
    return paths


def run_ours(directory: str, workers: int, epoch: int) -> tuple[float, int]:
    """One shuffled epoch through StreamingDataset; ``(seconds, samples)``."""
    from torch.utils.data import DataLoader

    from streaming_core import StreamingDataset
    dataset = StreamingDataset(local=directory, batch_size=256, shuffle=True, shuffle_seed=epoch,
                               shuffle_block_size=1 << 18)
    loader = DataLoader(dataset, batch_size=256, num_workers=workers, collate_fn=_batch)
    started = time.perf_counter()
    keys = [sample['__key__'] for batch in loader for sample in batch]
    seconds = time.perf_counter() - started
    if len(set(keys)) != len(dataset) or len(keys) != len(dataset):
        raise AssertionError(f'ours: {len(keys)} samples, {len(set(keys))} distinct, expected {len(dataset)}')
    return seconds, len(keys)


def run_theirs(paths: list[str], workers: int, samples: int, buffer: int) -> tuple[float, int]:
    """One shuffled epoch through webdataset.WebDataset (shard shuffle + shuffle buffer); ``(seconds, samples)``."""
    import webdataset as wds
    from torch.utils.data import DataLoader
    dataset = wds.WebDataset(paths, shardshuffle=len(paths), nodesplitter=wds.split_by_node,
                             empty_check=False).shuffle(buffer).decode()
    loader = DataLoader(dataset, batch_size=256, num_workers=workers, collate_fn=_batch)
    started = time.perf_counter()
    keys = [sample['__key__'] for batch in loader for sample in batch]
    seconds = time.perf_counter() - started
    if len(set(keys)) != samples or len(keys) != samples:
        raise AssertionError(f'webdataset: {len(keys)} samples, {len(set(keys))} distinct, expected {samples}')
    return seconds, len(keys)


def main() -> None:
    """Parse the options, write the data, measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--samples', type=int, default=100_000)
    parser.add_argument('--tars', type=int, default=16)
    parser.add_argument('--payload', type=int, default=3000, help='bytes of the jpg field')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--workers', default='0,2')
    parser.add_argument('--buffer', type=int, default=5000, help="webdataset's shuffle buffer")
    parser.add_argument('--data-dir', default=None, help='keep the tars here (default: a temporary directory)')
    parser.add_argument('--quick', action='store_true', help='20k samples, one round')
    args = parser.parse_args()
    if args.quick:
        args.samples, args.rounds = 20_000, 1
    print(f'bench_webdataset: {args.samples} samples ({args.payload} B + cls) in {args.tars} tars, '
          f'{args.rounds} round(s), load {os.getloadavg()[0]:.2f}')
    root = args.data_dir or tempfile.mkdtemp(prefix='bench-wds-')
    directory = os.path.join(root, 'tars')
    try:
        if os.path.isdir(directory):
            paths = sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith('.tar'))
        else:
            paths = write_tars(directory, args.samples, args.tars, args.payload)
        run_ours(directory, 0, 0)  # builds the derived index once (the warm state every later run sees)
        results: dict[tuple[str, int], list[float]] = {}
        for workers in [int(w) for w in args.workers.split(',')]:
            for r in range(args.rounds):
                order = ('ours', 'webdataset') if r % 2 == 0 else ('webdataset', 'ours')
                for name in order:
                    if name == 'ours':
                        seconds, count = run_ours(directory, workers, r + 1)
                    else:
                        seconds, count = run_theirs(paths, workers, args.samples, args.buffer)
                    results.setdefault((name, workers), []).append(count / seconds)
        print('| workers | ours (samples/s) | webdataset (samples/s) | ours / webdataset |')
        print('| --- | --- | --- | --- |')
        for workers in sorted({w for _, w in results}):
            ours = statistics.median(results[('ours', workers)])
            theirs = statistics.median(results[('webdataset', workers)])
            print(f'| {workers} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x |')
        print(f'load at the end {os.getloadavg()[0]:.2f}')
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
