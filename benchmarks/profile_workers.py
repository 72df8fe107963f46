"""Where a shuffled epoch through DataLoader workers spends its time: phases and CPU per process, optionally a
cProfile of worker 0 (its loop thread and its prefetch thread separately).

For a local dataset directory (any format we read: MDS, Parquet, WebDataset tars, litdata chunks), each epoch runs
``DataLoader(StreamingDataset(local=DIR, shuffle=True, batch_size=256), batch_size=256, num_workers=W,
collate_fn=<list of the samples>)`` on one dataset (new workers every epoch, as without ``persistent_workers``) and
prints, per epoch: seconds to the first batch (worker start-up: fork, planning, opening shards), seconds for the
rest, samples/s, the main process's CPU seconds (receiving and unpickling batches) and the workers' CPU seconds
(summed over the workers once they have exited). CPU seconds are robust to a busy machine where wall time is not.

``--profile`` writes ``worker0-loop.txt`` and ``worker0-prefetch.txt`` (cumulative cProfile, top 40) to
``--out``. ``--setup module:function`` calls that function first in this process (inherited by forked workers),
e.g. to measure a prototype of a change before it lands::

    .venv/bin/python benchmarks/profile_workers.py /tmp/data/litdata --workers 2 --epochs 4
    .venv/bin/python benchmarks/profile_workers.py /tmp/data/litdata --workers 2 --profile --out /tmp/prof
    .venv/bin/python benchmarks/profile_workers.py /tmp/data/litdata --setup mypackage.prototype:install
    .venv/bin/python benchmarks/profile_workers.py /tmp/data/litdata --setup pyarrow:cpu_count   # pyarrow imported
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import io
import os
import pstats
import resource
import sys
import time
from typing import Any

BATCH = 256


def _batch(samples: list[Any]) -> list[Any]:
    return samples


def _dump(profile: cProfile.Profile, path: str) -> None:
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats('cumulative').print_stats(40)
    with open(path, 'w') as handle:
        handle.write(text.getvalue())


def profiling_init(out: str) -> Any:
    """A ``worker_init_fn`` profiling worker 0's loop thread (until the worker exits) and its prefetch thread."""
    def init(worker_id: int) -> None:
        if worker_id:
            return
        from multiprocessing import util

        from streaming_core.reading import iteration
        loop = cProfile.Profile()
        plain_prefetch = iteration.EpochIterator._prefetch

        def prefetch(self: Any) -> None:
            profile = cProfile.Profile()
            profile.enable()
            try:
                plain_prefetch(self)
            finally:
                profile.disable()
                _dump(profile, os.path.join(out, 'worker0-prefetch.txt'))

        def finish() -> None:
            loop.disable()
            _dump(loop, os.path.join(out, 'worker0-loop.txt'))

        iteration.EpochIterator._prefetch = prefetch
        util.Finalize(None, finish, exitpriority=100)  # multiprocessing runs these as the worker exits
        loop.enable()
    return init


def epoch(dataset: Any, workers: int, seed: int, init: Any = None) -> dict[str, float]:
    """One shuffled epoch; its phases and CPU seconds."""
    from torch.utils.data import DataLoader
    dataset.shuffle_seed = seed
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=workers, collate_fn=_batch, worker_init_fn=init)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time()
    started = time.perf_counter()
    batches = iter(loader)
    first = next(batches)
    first_at = time.perf_counter()
    count = len(first) + sum(len(batch) for batch in batches)
    ended = time.perf_counter()
    main_cpu = time.process_time() - cpu
    del batches
    gc.collect()  # the iterator's finalizer joins the workers, so their CPU is counted below
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if count != len(dataset):
        raise AssertionError(f'{count} samples in the epoch, expected {len(dataset)}')
    return {'first batch s': first_at - started, 'rest s': ended - first_at, 'samples/s': count / (ended - started),
            'main CPU s': main_cpu,
            'workers CPU s': after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime}


def main() -> None:
    """Parse the options and print one line per epoch."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('directory', help='a local dataset directory')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--epochs', type=int, default=4)
    parser.add_argument('--profile', action='store_true', help="cProfile worker 0 of the last epoch")
    parser.add_argument('--out', default='.', help='where --profile writes its two files')
    parser.add_argument('--setup', action='append', default=[],
                        help='module:function to call first (e.g. a prototype to measure); repeatable')
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for setup in args.setup:
        module, _, function = setup.partition(':')
        getattr(importlib.import_module(module), function)()
    from streaming_core import StreamingDataset
    dataset = StreamingDataset(local=args.directory, batch_size=BATCH, shuffle=True, shuffle_seed=0)
    print(f'profile_workers: {args.directory}, {len(dataset):,} samples, {args.workers} workers, '
          f'{"setup " + ", ".join(args.setup) if args.setup else "no setup"}, load {os.getloadavg()[0]:.2f}')
    for n in range(1, args.epochs + 1):
        init = profiling_init(args.out) if args.profile and n == args.epochs else None
        result = epoch(dataset, args.workers, n, init)
        print(f'epoch {n}: ' + ', '.join(f'{key} {value:,.3f}' if value < 1000 else f'{key} {value:,.0f}'
                                         for key, value in result.items()), flush=True)
    print(f'load at the end {os.getloadavg()[0]:.2f}')


if __name__ == '__main__':
    main()
