"""litdata chunks: streaming-litdata reading litdata's ``optimize`` output against litdata 0.2.76 reading it, plus
random access ``ds[i]`` on those chunks next to the same samples written as MDS.

Data: ``--samples`` samples (default 100k) of a ``--payload``-byte JPEG-like bytes field ``jpg``, an int label
``cls`` and an int ``id`` (to check epochs), written once by litdata's ``optimize`` in the side virtualenv
``.venv-ref`` (``--chunks`` chunks, default 16, as bench_webdataset's 16 tars), and once by our ``MDSWriter`` with
about as many samples per shard.

1. Shuffled warm iteration, ``num_workers`` 0 and 2: ours is ``StreamingDataset(local=<litdata dir>,
   shuffle=True)`` through a torch ``DataLoader``; litdata's is its ``StreamingDataset(shuffle=True)`` through its
   ``StreamingDataLoader`` (its ``transform`` hook turns the ``memoryview`` bytes into ``bytes`` in the workers).
   Same batch size, a collate that keeps the list of samples; the clock runs from ``iter(loader)`` to the last
   batch, and every epoch must hold each id exactly once.
2. Random access: ``--count`` random ids (default 2,000), ``ds[i]`` timed one by one on a freshly constructed
   dataset; p50/p90 for ours on the litdata dir, litdata's own, and ours on the MDS copy.

Every epoch runs in a fresh process of its side's interpreter (this same file with ``--peer``): ours in ``.venv``,
litdata in ``.venv-ref/bin/python``, each importing torch and its library and constructing its dataset before the
clock starts, so neither side forks its DataLoader workers from a long-lived process (this benchmark's own, with
everything it wrote and read before) or reuses state from an earlier epoch. ``ds[i]`` latencies are timed in this
process for ours. Rounds are interleaved (the order rotating)
and the tables show medians::

    .venv/bin/python benchmarks/bench_litdata.py              # 100k samples, 3 rounds, workers 0 and 2
    .venv/bin/python benchmarks/bench_litdata.py --quick      # 20k samples, 1 round
"""

from __future__ import annotations

import argparse
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
REF_PYTHON = os.path.join(os.path.dirname(HERE), '.venv-ref', 'bin', 'python')
BATCH = 256
#: Where both sides cache their bytecode (the same place as the other benchmarks' measured processes).
PYCACHE = os.path.join(tempfile.gettempdir(), 'streaming-core-bench-pycache')


def _batch(samples: list[Any]) -> list[Any]:
    return samples


class _Samples:
    """Picklable ``fn`` for litdata's ``optimize`` (the blob is built once per process)."""

    def __init__(self, payload: int) -> None:
        self.payload = payload
        self.blob = b''

    def __call__(self, index: int) -> dict[str, Any]:
        if not self.blob:
            rng = random.Random(0)
            self.blob = bytes(rng.getrandbits(8) for _ in range(self.payload + 256))
        return {'jpg': b'\xff\xd8\xff' + self.blob[index % 256:index % 256 + self.payload - 3],
                'cls': index % 1000, 'id': index}


# ---------------------------------------------------------------------------------------------------- litdata side
def _bytes_field(item: dict[str, Any]) -> dict[str, Any]:
    item['jpg'] = bytes(item['jpg'])
    return item


def _litdata_dataset(directory: str, shuffle: bool, seed: int) -> Any:
    from litdata import StreamingDataset
    os.environ.setdefault('DATA_OPTIMIZER_CACHE_FOLDER', os.path.join(tempfile.gettempdir(), 'bench-litdata-cache'))
    return StreamingDataset(directory, shuffle=shuffle, seed=seed, transform=_bytes_field)


def peer(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one measured task in a fresh process: litdata's in ``.venv-ref`` (``write``, ``iterate`` or ``access``),
    ours (``iterate-ours``) in ``.venv``; returns the JSON answer."""
    import logging
    if spec['task'] == 'iterate-ours':
        if spec.get('setup'):  # --ours-setup: e.g. a prototype of a change to measure against litdata
            import importlib
            sys.path.insert(0, os.path.dirname(HERE))
            module, _, function = spec['setup'].partition(':')
            getattr(importlib.import_module(module), function)()
        return ours_epoch(spec['dir'], spec['workers'], spec['seed'])

    import litdata
    import torch.utils.data  # noqa: F401
    logging.getLogger('litdata').setLevel(logging.ERROR)
    if spec['task'] == 'write':
        litdata.optimize(fn=_Samples(spec['payload']), inputs=list(range(spec['samples'])), output_dir=spec['dir'],
                         chunk_size=spec['per_chunk'], num_workers=1, reorder_files=False, verbose=False,
                         mode='overwrite', start_method='fork')
        return {'ok': True}
    if spec['task'] == 'iterate':
        dataset = _litdata_dataset(spec['dir'], True, spec['seed'])
        loader = litdata.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=spec['workers'],
                                             collate_fn=_batch)
        started = time.perf_counter()
        ids = [sample['id'] for batch in loader for sample in batch]
        return {'seconds': time.perf_counter() - started, 'ids': len(ids), 'distinct': len(set(ids))}
    dataset = _litdata_dataset(spec['dir'], False, 0)
    return {'latencies': time_access(dataset, spec['ids'], spec['payload'])}


# ---------------------------------------------------------------------------------------------------- shared
def time_access(dataset: Any, ids: list[int], payload: int) -> list[float]:
    """``dataset[i]`` for each id, timed one by one (seconds); every answer is checked."""
    latencies = []
    for index in ids:
        started = time.perf_counter()
        sample = dataset[index]
        latencies.append(time.perf_counter() - started)
        if sample['id'] != index or len(sample['jpg']) != payload:
            raise AssertionError(f'ds[{index}] returned id {sample["id"]} with {len(sample["jpg"])} bytes')
    return latencies


def run_peer(spec: dict[str, Any], python: str = REF_PYTHON) -> dict[str, Any]:
    """This file with ``--peer`` in a new process of ``python`` (litdata's: ``.venv-ref``); the JSON it prints
    last."""
    env = dict(os.environ, PYTHONWARNINGS='ignore')
    done = subprocess.run([python, os.path.abspath(__file__), '--peer', json.dumps(spec)], capture_output=True,
                          text=True, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f'{spec["task"]} ({python}) failed:\n{done.stderr[-3000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------- our side
def write_mds(directory: str, samples: int, per_shard: int, payload: int) -> None:
    """The same samples with our MDSWriter, about ``per_shard`` samples per shard."""
    from streaming_core import MDSWriter
    columns = {'jpg': 'bytes', 'cls': 'int', 'id': 'int'}
    make = _Samples(payload)
    with MDSWriter(out=directory, columns=columns, size_limit=per_shard * (payload + 24)) as writer:
        for index in range(samples):
            writer.write(make(index))


def ours_epoch(directory: str, workers: int, seed: int) -> dict[str, Any]:
    """In a fresh ``.venv`` process (as litdata's epochs run in fresh ``.venv-ref`` processes): one shuffled epoch
    through StreamingDataset over the litdata dir, torch and our reader imported before the clock."""
    from torch.utils.data import DataLoader

    import streaming_litdata  # noqa: F401
    from streaming_core import StreamingDataset
    dataset = StreamingDataset(local=directory, batch_size=BATCH, shuffle=True, shuffle_seed=seed)
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=workers, collate_fn=_batch)
    started = time.perf_counter()
    ids = [sample['id'] for batch in loader for sample in batch]
    return {'seconds': time.perf_counter() - started, 'ids': len(ids), 'distinct': len(set(ids))}


def run_ours(directory: str, workers: int, epoch: int, samples: int, setup: str | None = None) -> tuple[float, int]:
    """One shuffled epoch of ours in a fresh process (after calling ``setup``, a ``module:function``);
    ``(seconds, samples)``."""
    answer = run_peer({'task': 'iterate-ours', 'dir': directory, 'workers': workers, 'seed': epoch,
                       'setup': setup}, python=sys.executable)
    if answer['ids'] != samples or answer['distinct'] != samples:
        raise AssertionError(f'ours: {answer["ids"]} samples, {answer["distinct"]} distinct, expected {samples}')
    return answer['seconds'], answer['ids']


def run_theirs(directory: str, workers: int, epoch: int, samples: int) -> tuple[float, int]:
    """One shuffled epoch through litdata's StreamingDataset + StreamingDataLoader; ``(seconds, samples)``."""
    answer = run_peer({'task': 'iterate', 'dir': directory, 'workers': workers, 'seed': epoch})
    if answer['ids'] != samples or answer['distinct'] != samples:
        raise AssertionError(f'litdata: {answer["ids"]} samples, {answer["distinct"]} distinct, expected {samples}')
    return answer['seconds'], answer['ids']


def access(name: str, litdata_dir: str, mds_dir: str, ids: list[int], payload: int) -> list[float]:
    """Random-access latencies of one implementation on a freshly constructed dataset."""
    if name == 'litdata':
        return run_peer({'task': 'access', 'dir': litdata_dir, 'ids': ids, 'payload': payload})['latencies']
    from streaming_core import StreamingDataset
    dataset = StreamingDataset(local=litdata_dir if name == 'ours (litdata chunks)' else mds_dir, batch_size=1)
    return time_access(dataset, ids, payload)


def _reexec_with_bytecode() -> None:
    """Run again with bytecode caching on, in ``PYCACHE`` (as ``peers/driver.py`` does for every measured process).

    With ``PYTHONDONTWRITEBYTECODE=1`` (set on some machines) our editable install and its plugins, imported lazily
    in DataLoader workers, would be compiled from source in every measurement while litdata's site-packages keep
    their ``.pyc`` files. The litdata subprocesses inherit the same environment.
    """
    env = dict(os.environ, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop('PYTHONDONTWRITEBYTECODE', None)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def main() -> None:
    """Parse the options, write the data, measure and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--samples', type=int, default=100_000)
    parser.add_argument('--chunks', type=int, default=16, help="litdata chunks (optimize's chunk_size follows)")
    parser.add_argument('--payload', type=int, default=3000, help='bytes of the jpg field')
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--workers', default='0,2')
    parser.add_argument('--count', type=int, default=2000, help='random ids for the access table')
    parser.add_argument('--data-dir', default=None, help='keep the data here (default: a temporary directory)')
    parser.add_argument('--quick', action='store_true', help='20k samples, one round')
    parser.add_argument('--ours-setup', default=None, help='module:function our measured processes call first (to '
                        'measure a prototype, e.g. mypackage.prototype:install)')
    parser.add_argument('--peer', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        print(json.dumps(peer(json.loads(args.peer))))
        return
    if os.environ.get('PYTHONDONTWRITEBYTECODE') or os.environ.get('PYTHONPYCACHEPREFIX') != PYCACHE:
        _reexec_with_bytecode()
    if not os.path.exists(REF_PYTHON):
        sys.exit(f'bench_litdata: {REF_PYTHON} is missing; build the side virtualenv with compat/setup.sh --bench')
    if args.quick:
        args.samples, args.rounds = 20_000, 1
    print(f'bench_litdata: {" ".join(sys.argv[1:]) or "(defaults)"}: {args.samples} samples ({args.payload} B + cls)'
          f' in {args.chunks} litdata chunks, {args.rounds} round(s), load {os.getloadavg()[0]:.2f}', flush=True)
    root = args.data_dir or tempfile.mkdtemp(prefix='bench-litdata-')
    litdata_dir, mds_dir = os.path.join(root, 'litdata'), os.path.join(root, 'mds')
    per_chunk = -(-args.samples // args.chunks)
    try:
        if not os.path.exists(os.path.join(litdata_dir, 'index.json')):
            run_peer({'task': 'write', 'dir': litdata_dir, 'samples': args.samples, 'per_chunk': per_chunk,
                      'payload': args.payload})
        if not os.path.exists(os.path.join(mds_dir, 'index.json')):
            write_mds(mds_dir, args.samples, per_chunk, args.payload)
        run_ours(litdata_dir, 0, 0, args.samples)  # derives our index of the litdata dir once (every run sees it)
        run_theirs(litdata_dir, 0, 0, args.samples)  # unrecorded warm-up
        rates: dict[tuple[str, int], list[float]] = {}
        for workers in [int(w) for w in args.workers.split(',')]:
            for r in range(args.rounds):
                order = ('ours', 'litdata') if r % 2 == 0 else ('litdata', 'ours')
                for name in order:
                    if name == 'ours':
                        seconds, count = run_ours(litdata_dir, workers, r + 1, args.samples, args.ours_setup)
                    else:
                        seconds, count = run_theirs(litdata_dir, workers, r + 1, args.samples)
                    rates.setdefault((name, workers), []).append(count / seconds)
        print('\nShuffled warm iteration (samples/s, medians):\n')
        print('| workers | ours (samples/s) | litdata (samples/s) | ours / litdata |')
        print('| --- | ---: | ---: | ---: |')
        for workers in sorted({w for _, w in rates}):
            ours = statistics.median(rates[('ours', workers)])
            theirs = statistics.median(rates[('litdata', workers)])
            print(f'| {workers} | {ours:,.0f} | {theirs:,.0f} | {ours / theirs:.2f}x |', flush=True)
        ids = random.Random(1).sample(range(args.samples), min(args.count, args.samples))
        names = ['ours (litdata chunks)', 'litdata', 'ours (MDS)']
        p50: dict[str, list[float]] = {}
        p90: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for name in names[r % 3:] + names[:r % 3]:
                latencies = access(name, litdata_dir, mds_dir, ids, args.payload)
                p50.setdefault(name, []).append(_pct(latencies, 0.5))
                p90.setdefault(name, []).append(_pct(latencies, 0.9))
        print(f'\nRandom access, {len(ids):,} random ids, ds[i] one by one (us, medians):\n')
        print('| impl | p50 us | p90 us | p50 vs ours (litdata chunks) |')
        print('| --- | ---: | ---: | ---: |')
        base = statistics.median(p50['ours (litdata chunks)'])
        for name in names:
            median50, median90 = statistics.median(p50[name]), statistics.median(p90[name])
            print(f'| {name} | {median50:.1f} | {median90:.1f} | {median50 / base:.2f}x |')
        print(f'\nload at the end {os.getloadavg()[0]:.2f}')
    finally:
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__':
    main()
