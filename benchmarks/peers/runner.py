"""One measurement in a fresh process: ``python runner.py '<json spec>'`` prints one JSON line.

Spec keys: ``task`` (``write``, ``iterate``, ``first``, ``access``), ``impl`` (``ours``, ``reference``,
``litdata``, ``webdataset``, ``floor``), ``case`` (``small``, ``image``), ``source`` (the driver's ``.npy``),
``path`` (the library's dataset directory, or its empty cache directory with ``remote``), and per task:

* ``write``: ``size_limit`` (MDS bytes), ``samples_per_shard`` (the others' count per shard);
* ``iterate``: ``shuffle``, ``workers``, ``batch_size``, ``seed``, optional ``remote``/``endpoint``/``shards``,
  ``max_seconds`` and ``warm`` (read the files into the page cache first);
* ``first``: time from constructing the dataset to its first sample (``iter(ds)``, no DataLoader);
* ``access``: ``count`` random ids (``seed``), ``ds[i]`` timed one by one.

Any task but ``write`` takes ``profile``: a path where the cProfile stats of its timed part are dumped (for
``iterate``, meaningful with ``workers`` 0 only).

The library is imported before any clock starts.

``python runner.py --serve IMPL`` is a fork server: it imports torch and the library once, then reads one JSON
spec per line on stdin and runs each in a freshly forked child (so every measurement starts from the same clean,
imported process state, without paying the imports again), answering ``@@RESULT <json>`` then ``@@DONE``. A
spec's ``tmpdir`` becomes the child's ``TMPDIR``; ``timeout`` (seconds) bounds the child. The server calls
``gc.freeze()`` before forking, so a child's garbage collections neither walk nor copy-on-write the parent's
imported objects (without it a child pays page copies a fresh process does not; with it, a child's full
collections are cheaper than a fresh process's, which walk torch's objects too). Throughput runs use the server;
start-up measurements (``first``, ``access``) use fresh processes (``python runner.py '<spec>'``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import logging
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
from common import (
    check_answers,
    check_sample,
    load_source,
    percentiles,
    time_epoch,
    time_random_access,
    warm_page_cache,
)

#: Modules each implementation imports before the clock starts.
IMPORTS = {'ours': ('streaming_core.reading.dataset', 'streaming_core.reading.iteration', 'streaming_mds'),
           'reference': ('streaming', 'streaming.base.util'), 'litdata': ('litdata',), 'webdataset': ('webdataset',),
           'floor': ()}


RESULT, DONE = '@@RESULT ', '@@DONE'


def preload(name: str) -> Any:
    """Import torch's data utilities, the library and its ``impl_`` module (outside every clock)."""
    import torch.utils.data  # noqa: F401
    for module in IMPORTS[name]:
        importlib.import_module(module)
    return importlib.import_module(f'impl_{name}')


@contextlib.contextmanager
def profiled(spec: dict[str, Any]) -> Iterator[None]:
    """cProfile the block when ``spec['profile']`` is set (the timings then include its overhead).

    Writes ``[[function, calls, own seconds, cumulative seconds], ...]`` as JSON to that path, summing entries of
    distinct code objects with the same name and line (pstats would keep only one of them: the MDS reader compiles
    one decoder per shard, all named ``<string>:1(decode)``).
    """
    if not spec.get('profile'):
        yield
        return
    import cProfile
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        totals: dict[str, list[float]] = {}
        for entry in profiler.getstats():
            code = entry.code
            if isinstance(code, str):
                label = code
            else:
                label = f'{code.co_filename}:{code.co_firstlineno}({code.co_name})'
            row = totals.setdefault(label, [0, 0.0, 0.0])
            row[0] += entry.callcount
            row[1] += entry.inlinetime
            row[2] += entry.totaltime
        with open(spec['profile'], 'w') as handle:
            json.dump([[label, *row] for label, row in totals.items()], handle)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Execute one spec and return its result."""
    impl = preload(spec['impl'])
    case, path, task = spec['case'], spec['path'], spec['task']
    source = load_source(spec['source'])
    if task == 'write':
        start = time.perf_counter()
        extra = {'source_path': spec['source']} if spec['impl'] == 'litdata' else {}
        impl.write(case, source, path, spec['size_limit'], spec['samples_per_shard'], **extra)
        return {'seconds': time.perf_counter() - start}
    options = {}
    if spec.get('remote'):
        options = {'remote': spec['remote'], 'endpoint': spec['endpoint']}
        if spec.get('shards'):
            options['shards'] = spec['shards']
    elif spec.get('warm', True) and task != 'access':
        warm_page_cache(path)
    if task == 'iterate':
        start = time.perf_counter()
        dataset = impl.dataset(case, path, shuffle=spec['shuffle'], batch_size=spec['batch_size'], seed=spec['seed'],
                               **options)
        init = time.perf_counter() - start
        with profiled(spec):
            result = time_epoch(dataset, case, source, batch_size=spec['batch_size'], workers=spec['workers'],
                                max_seconds=spec.get('max_seconds'))
        result['init_s'] = init
        return result
    if task == 'first':
        with profiled(spec):
            start = time.perf_counter()
            dataset = impl.dataset(case, path, shuffle=False, batch_size=spec.get('batch_size', 256), seed=0,
                                   **options)
            init = time.perf_counter() - start
            item = next(iter(dataset))
            first = time.perf_counter() - start
        check_sample(case, source, item)
        return {'first_s': first, 'init_s': init}
    if task == 'access':
        if spec.get('warm', True):
            warm_page_cache(path)
        start = time.perf_counter()
        dataset = impl.random_access(case, path)
        item = dataset[0]
        first = time.perf_counter() - start
        check_sample(case, source, item)
        ids = np.random.default_rng(spec['seed']).integers(0, len(source), spec['count']).tolist()
        with profiled(spec):
            times, answers = time_random_access(dataset, ids)
        check_answers(case, source, ids, answers)
        result = percentiles(times)
        result['first_s'] = first
        return result
    raise ValueError(f'unknown task {task!r}')


def _child(spec: dict[str, Any]) -> None:
    """In the forked child: private TMPDIR, a time bound, run, answer, exit without cleanup handlers."""
    code = 0
    try:
        if spec.get('tmpdir'):
            os.makedirs(spec['tmpdir'], exist_ok=True)
            os.environ['TMPDIR'] = spec['tmpdir']
            tempfile.tempdir = None
        if spec.get('timeout'):
            signal.alarm(int(spec['timeout']))
        result = run(spec)
    except BaseException as err:  # reported to the driver, which prints it
        result = {'error': f'{type(err).__name__}: {err}', 'trace': traceback.format_exc()[-3000:]}
        code = 1
    signal.alarm(0)
    sys.stdout.write(RESULT + json.dumps(result) + '\n')
    sys.stdout.flush()
    os._exit(code)


def serve(name: str) -> None:
    """The fork server loop (see the module docstring)."""
    preload(name)
    gc.collect()
    gc.freeze()  # see the module docstring
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(spec)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            sys.stdout.write(RESULT + json.dumps({'error': f'child died: {os.waitstatus_to_exitcode(status)}'}) + '\n')
        sys.stdout.write(DONE + '\n')
        sys.stdout.flush()


def main() -> None:
    """Serve (``--serve IMPL``) or run the spec given in argv, printing the result as the last line of stdout."""
    warnings.simplefilter('ignore')
    logging.disable(logging.WARNING)
    os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')
    if sys.argv[1] == '--serve':
        serve(sys.argv[2])
        return
    result = run(json.loads(sys.argv[1]))
    sys.stdout.flush()
    print(json.dumps(result), flush=True)


if __name__ == '__main__':
    main()
