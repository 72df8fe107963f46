"""Helpers for the scripts that run inside the reference virtualenv (``.venv-ref``, mosaicml-streaming 0.13).

Every script puts the repository root on ``sys.path`` (so :mod:`compat.tagged` imports), reads one JSON request
file and writes one JSON result file. Nothing here imports streaming-core.
"""

from __future__ import annotations

import atexit
import gc
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from compat import tagged  # noqa: E402
from compat.reference_guard import assert_reference_streaming  # noqa: E402

# Every script compares against the reference: refuse to run on anything else (streaming-compat provides a
# `streaming` package too).
REFERENCE_PATH = assert_reference_streaming()

__all__ = ['ROOT', 'tagged', 'fresh', 'read_with_dataset', 'read_with_readers', 'load_request', 'dump_result',
           'versions', 'writer_class', 'make_dataset', 'error_text', 'run_isolated', 'run_forked']

# The reference puts its shared-memory file locks in the temporary directory and never deletes them (every run
# would burn prefixes in /tmp). Give it a private one, removed when this process ends.
_PRIVATE_TMP = tempfile.mkdtemp(prefix='compat-ref-tmp-')
tempfile.tempdir = _PRIVATE_TMP
os.environ['TMPDIR'] = _PRIVATE_TMP
atexit.register(shutil.rmtree, _PRIVATE_TMP, True)


def fresh() -> None:
    """Release leftovers of previous datasets: collect garbage, then clean the reference's shared memory."""
    from streaming.base.util import clean_stale_shared_memory
    gc.collect()
    for attempt in range(5):
        try:
            clean_stale_shared_memory()
            return
        except (FileNotFoundError, FileExistsError):
            # Another reference process on this host (the names in /dev/shm are host-wide) created or removed a
            # name between the reference's check and its unlink. Try again.
            if attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))


def _copy(src: str) -> str:
    tmp = tempfile.mkdtemp(prefix='compat-ref-')
    dst = os.path.join(tmp, 'ds')
    shutil.copytree(src, dst)
    return dst


def read_with_dataset(path: str, validate_hash: str | None = None) -> dict[str, Any]:
    """Read every sample of the dataset at ``path`` with the reference ``StreamingDataset``.

    The directory is copied first (the reference decompresses shards next to the index). With ``validate_hash``
    the dataset is instead read with ``remote=path`` into an empty local directory, so every shard is "downloaded"
    and checked against that hash from the index. Returns ``{'getitem': [...], 'iter': [...]}`` of
    :func:`compat.tagged.encode` forms: random access ``ds[i]`` over ``range(ds.size)`` and an unshuffled
    iteration in this process.
    """
    from streaming import StreamingDataset
    fresh()
    if validate_hash:
        local = os.path.join(tempfile.mkdtemp(prefix='compat-ref-'), 'ds')
        kwargs = {'remote': path, 'validate_hash': validate_hash}
    else:
        local = _copy(path)
        kwargs = {}
    try:
        ds = StreamingDataset(local=local, batch_size=1, allow_unsafe_types=True, **kwargs)
        getitem = [tagged.encode(ds[i]) for i in range(ds.size)]
        iterated = [tagged.encode(sample) for sample in ds]
        del ds
        return {'getitem': getitem, 'iter': iterated}
    finally:
        shutil.rmtree(os.path.dirname(local), ignore_errors=True)
        fresh()


def read_with_readers(path: str) -> list[Any]:
    """Read every sample through the reference's shard readers directly (``reader_from_json``), shard by shard.

    Compressed parts are decompressed with the reference's ``decompress`` into a copy of the directory first.
    """
    from streaming.base.compression import decompress
    from streaming.base.format import reader_from_json
    local = _copy(path)
    try:
        with open(os.path.join(local, 'index.json')) as handle:
            index = json.load(handle)
        samples = []
        for entry in index['shards']:
            reader = reader_from_json(local, None, entry)
            reader.validate(True)
            for raw, zipped in reader.file_pairs:
                raw_path = os.path.join(local, raw.basename)
                if zipped is not None and not os.path.exists(raw_path):
                    with open(os.path.join(local, zipped.basename), 'rb') as handle:
                        data = decompress(reader.compression, handle.read())
                    with open(raw_path, 'wb') as handle:
                        handle.write(data)
            samples.extend(tagged.encode(reader.get_item(i)) for i in range(reader.samples))
        return samples
    finally:
        shutil.rmtree(os.path.dirname(local), ignore_errors=True)


def writer_class(name: str) -> Any:
    """The reference writer class of that name (``MDSWriter``, ``JSONWriter``, ``CSVWriter``, ...)."""
    import streaming
    return getattr(streaming, name)


def versions() -> dict[str, str]:
    """Versions of what decides the bytes: the reference, numpy, Pillow, the codec libraries, Python."""
    import platform

    import numpy
    import PIL
    import streaming
    out = {'streaming': streaming.__version__, 'numpy': numpy.__version__, 'pillow': PIL.__version__,
           'python': platform.python_version()}
    try:
        from PIL import features
        out['libjpeg'] = str(features.version('jpg'))
        out['zlib'] = str(features.version('zlib'))
    except Exception:  # pragma: no cover - informational only
        pass
    return out


def load_request() -> tuple[Any, str]:
    """``(request object, result path)`` from ``argv[1]`` (a JSON file) and ``argv[2]``."""
    if len(sys.argv) != 3:
        raise SystemExit(f'usage: {sys.argv[0]} REQUEST.json RESULT.json')
    with open(sys.argv[1]) as handle:
        return json.load(handle), sys.argv[2]


def dump_result(obj: Any, path: str) -> None:
    """Write the result JSON (strict: NaN must already be tagged)."""
    with open(path, 'w') as handle:
        json.dump(obj, handle, allow_nan=False)


def make_dataset(data_dir: str, case: dict[str, Any]) -> Any:
    """The reference ``StreamingDataset`` a compat case describes (after cleaning stale shared memory).

    ``case`` has ``kwargs`` (constructor keywords) and either ``local`` (a dataset name under ``data_dir``) or
    ``streams`` (a list of ``{'local': name, 'proportion'|'repeat'|'choose': ...}``).
    """
    from streaming import Stream, StreamingDataset
    fresh()
    kwargs = dict(case.get('kwargs', {}))
    if case.get('streams'):
        streams = []
        for spec in case['streams']:
            spec = dict(spec)
            spec['local'] = os.path.join(data_dir, spec['local'])
            streams.append(Stream(**spec))
        return StreamingDataset(streams=streams, **kwargs)
    return StreamingDataset(local=os.path.join(data_dir, case['local']), **kwargs)


def error_text(err: BaseException) -> str:
    """``'TypeName: message'`` of an exception, for results."""
    return f'{type(err).__name__}: {err}'


def _child(conn: Any, fn: Callable[..., Any], args: tuple) -> None:
    try:
        result = fn(*args)
        conn.send(json.dumps(result, allow_nan=False))
    except BaseException as err:  # noqa: B036 - reported to the parent, which records it
        conn.send(json.dumps({'error': error_text(err), 'traceback': traceback.format_exc()[-4000:]}))
    finally:
        conn.close()


def _shm_race(result: Any) -> bool:
    """Whether a result is an error from the host-wide shared-memory names (another reference process raced)."""
    if not isinstance(result, dict) or 'error' not in result:
        return False
    error = result['error']
    return error.startswith(('FileNotFoundError', 'FileExistsError')) and "'/0" in error


def run_isolated(fn: Callable[..., Any], *args: Any, timeout: float = 120.0, attempts: int = 3) -> Any:
    """:func:`run_forked`, tried again (up to ``attempts`` times) when another reference process on this host
    raced for the same shared-memory names.
    """
    for _ in range(attempts - 1):
        result = run_forked(fn, *args, timeout=timeout)
        if not _shm_race(result):
            return result
        time.sleep(0.2)
    return run_forked(fn, *args, timeout=timeout)


def run_forked(fn: Callable[..., Any], *args: Any, timeout: float = 120.0) -> Any:
    """``fn(*args)`` in a forked child; its JSON-able result, or ``{'error': ...}`` when it raised or hung.

    The reference never releases a dataset's shared memory and file descriptors inside a process (they are held
    until exit), so a long run of cases in one process runs out of descriptors. A forked child starts from this
    process's imports (cheap) and takes all of that with it when it exits; :func:`fresh` in the next case then
    unlinks the shared-memory names it left.
    """
    import streaming  # noqa: F401 - import once in the parent, so each forked child starts warm
    ctx = multiprocessing.get_context('fork')
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args))  # not daemonic: it may start DataLoader workers
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.kill()
            return {'error': f'TimeoutError: the reference did not finish within {timeout} s'}
        text = parent.recv()
    except EOFError:
        text = json.dumps({'error': f'ChildProcessError: the reference process died (exit {proc.exitcode})'})
    finally:
        proc.join(10)
        parent.close()
    return json.loads(text)
