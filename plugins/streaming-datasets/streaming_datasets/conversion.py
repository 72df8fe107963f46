"""The conversion engine shared by every recipe: source items in, one MDS dataset (one split) out.

A recipe lists its *items* (files, images, rows, chunks of rows) in source order and gives a *producer*: a
module-level function ``produce(items) -> Iterable[sample dict | Skip]``. With ``workers=1`` the items are written
by one :class:`~streaming_mds.MDSWriter` in this process. With ``workers=N`` they are cut into ``N`` contiguous
partitions written in parallel by ``N`` processes (``spawn``) into ``out/00000``, ``out/00001``, ... and the
partition indexes are merged with :func:`streaming_core.merge.merge_index`, so the merged dataset holds the samples
in exactly the order one process would have written them. A progress bar (tqdm) counts samples in both cases.

A producer yields :class:`Skip` for a source record it leaves out on purpose (an image that was never downloaded);
skips are counted in the :class:`ConversionResult`, never silent. A conversion that fails commits nothing: no
``index.json`` is written for a partial split (run it again with ``exist_ok``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import queue as queue_module
import shutil
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming_core.errors import StreamingError
from streaming_core.storage import exists, is_remote, join, local_path

__all__ = ['ConversionResult', 'ConversionError', 'SourceLayoutError', 'Skip', 'convert_split', 'partition_items',
           'WriterOptions', 'DEFAULT_SIZE_LIMIT']

logger = logging.getLogger('streaming_datasets')

#: The default shard size limit (64 MiB, as mosaicml-streaming's writers).
DEFAULT_SIZE_LIMIT = 1 << 26
_MAX_REASONS = 10
_REPORT_EVERY = 0.2  # seconds between progress messages from a partition process
_DEATH_GRACE = 1.0   # seconds a dead partition process may take to deliver its last message


class SourceLayoutError(StreamingError, ValueError):
    """The source files are missing, misplaced or malformed for the dataset being converted."""


class ConversionError(StreamingError, RuntimeError):
    """A partition of a parallel conversion failed (the message names the partition and the cause)."""


@dataclass(frozen=True)
class Skip:
    """Yielded by a producer instead of a sample for a source record left out on purpose.

    Attributes:
        reason: Why the record was skipped (shown in the result's ``skip_reasons``).
    """

    reason: str


@dataclass
class ConversionResult:
    """What one split's conversion wrote.

    Attributes:
        out: Where the dataset (its ``index.json``) was written.
        samples: Samples written.
        skipped: Source records skipped (see ``skip_reasons``).
        partitions: Processes used (1 when written in this process).
        skip_reasons: The first few skip reasons.
    """

    out: str
    samples: int
    skipped: int = 0
    partitions: int = 1
    skip_reasons: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WriterOptions:
    """Options common to every converter (the MDS writer's and the engine's).

    Attributes:
        workers: Parallel partition processes (1: write in this process).
        compression: A compression string such as ``'zstd'`` or ``'zstd:7'`` (None: uncompressed).
        hashes: Hash names recorded per shard file (sorted).
        size_limit: Shard size limit in bytes (int or ``'64mb'``).
        exist_ok: Replace a non-empty output directory instead of refusing.
        progress: Show a progress bar.
        storage_options: Options for a remote output's storage backend (``endpoint_url``, ``profile``...).
    """

    workers: int = 1
    compression: str | None = None
    hashes: Sequence[str] | None = None
    size_limit: int | str | None = DEFAULT_SIZE_LIMIT
    exist_ok: bool = False
    progress: bool = True
    storage_options: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f'workers must be a positive integer (the number of parallel conversion processes), '
                             f'got {self.workers!r}.')
        # Checked here, before any process starts, rather than in every partition.
        from streaming_core.compression import parse_compression
        from streaming_core.hashing import get_hash
        from streaming_core.writer import parse_size_limit
        if self.compression:
            try:
                parse_compression(self.compression)
            except (ValueError, LookupError) as err:
                raise ValueError(f'Invalid compression {self.compression!r}: {err}') from err
        if self.hashes is not None and (isinstance(self.hashes, str) or list(self.hashes) != sorted(self.hashes)):
            raise ValueError(f'hashes must be a sorted list of hash names, got {self.hashes!r}.')
        for name in self.hashes or ():
            try:
                get_hash(name)
            except (ValueError, LookupError) as err:
                raise ValueError(f'Invalid hash {name!r}: {err}') from err
        parse_size_limit(self.size_limit)

    def writer_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~streaming_mds.MDSWriter` (besides ``out`` and ``columns``)."""
        return {'compression': self.compression, 'hashes': list(self.hashes) if self.hashes else None,
                'size_limit': self.size_limit, 'storage_options': dict(self.storage_options or {})}


def partition_items(items: Sequence[Any], parts: int) -> list[Sequence[Any]]:
    """Cut ``items`` into ``min(parts, len(items))`` contiguous, non-empty chunks of near-equal length, in order."""
    count = min(max(int(parts), 1), len(items))
    if count == 0:
        return []
    base, extra = divmod(len(items), count)
    chunks, start = [], 0
    for k in range(count):
        stop = start + base + (1 if k < extra else 0)
        chunks.append(items[start:stop])
        start = stop
    return chunks


def convert_split(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Mapping[str, Any] | Skip]],
                  columns: Mapping[str, str], out: str, options: WriterOptions | None = None, *,
                  total: int | None = None, desc: str = 'Converting') -> ConversionResult:
    """Write the samples that ``produce`` makes from ``items`` as one MDS dataset in ``out``.

    Args:
        items: The source items in source order (picklable when ``options.workers > 1``).
        produce: A module-level function ``produce(items)`` yielding sample dicts (or :class:`Skip`).
        columns: The MDS columns (name -> encoding).
        out: A local directory or a remote URL (written through the storage registry).
        options: Writer and engine options.
        total: The expected number of samples, for the progress bar (None when unknown).
        desc: The progress bar's label.

    Raises:
        SourceLayoutError: ``items`` is empty.
        FileExistsError: ``out`` is not empty and ``exist_ok`` is not set.
        ConversionError: a partition process failed or died.
    """
    options = options or WriterOptions()
    if not items:
        raise SourceLayoutError(f'{desc}: nothing to convert (no source items were found).')
    chunks = partition_items(items, options.workers)
    if len(chunks) > 1:
        try:
            pickle.dumps((produce, chunks[0][:1]))
        except Exception as err:
            raise ValueError(f'{desc}: the producer {produce!r} or its items cannot be sent to worker processes '
                             f'({err}); define the producer at module level, or use workers=1.') from err
    _prepare_root(out, options)
    if len(chunks) == 1:
        return _convert_here(items, produce, columns, out, options, total, desc)
    return _convert_parallel(chunks, produce, columns, out, options, total, desc)


# ----------------------------------------------------------------------------------------------------------------
def _bar(options: WriterOptions, total: int | None, desc: str) -> Any:
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=' samples', dynamic_ncols=True, disable=not options.progress)


def _write(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]], columns: Mapping[str, str],
           out: str, writer_kwargs: Mapping[str, Any], exist_ok: bool,
           report: Callable[[int], None]) -> tuple[int, int, list[str]]:
    """Write one dataset; returns ``(samples, skipped, first skip reasons)``; ``report(n)`` gets progress."""
    from streaming_mds import MDSWriter
    samples = skipped = 0
    reasons: list[str] = []
    writer = MDSWriter(out=out, columns=dict(columns), exist_ok=exist_ok, **writer_kwargs)
    # Not a `with` block: on an error the writer must not commit index.json for a partial conversion.
    for sample in produce(items):
        if isinstance(sample, Skip):
            skipped += 1
            if len(reasons) < _MAX_REASONS:
                reasons.append(sample.reason)
            continue
        writer.write(sample)
        samples += 1
        report(1)
    writer.finish()
    return samples, skipped, reasons


def _convert_here(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]],
                  columns: Mapping[str, str], out: str, options: WriterOptions, total: int | None,
                  desc: str) -> ConversionResult:
    with _bar(options, total, desc) as bar:
        samples, skipped, reasons = _write(items, produce, columns, out, options.writer_kwargs(), options.exist_ok,
                                           bar.update)
    _log_skips(desc, skipped, reasons, samples)
    return ConversionResult(out=out, samples=samples, skipped=skipped, partitions=1, skip_reasons=reasons)


def _log_skips(desc: str, skipped: int, reasons: list[str], samples: int) -> None:
    if not samples:
        logger.warning('%s: no sample was written (%d source records skipped).', desc, skipped)
    if skipped:
        logger.warning('%s: skipped %d source record(s); first: %s', desc, skipped, '; '.join(reasons[:3]))


def _prepare_root(out: str, options: WriterOptions) -> None:
    """Refuse (or clear, with ``exist_ok``) a non-empty output before anything is written into it."""
    exist_ok = options.exist_ok
    if is_remote(out):
        if not exist_ok and exists(join(out, 'index.json'), options=options.storage_options):
            raise FileExistsError(f'The remote output already holds a dataset: {join(out, "index.json")}. Pass '
                                  f'exist_ok=True (--exist-ok) to overwrite it, or choose another location.')
        return
    path = local_path(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f'Conversion output {path} exists and is not a directory.')
    if os.path.isdir(path) and os.listdir(path):
        if not exist_ok:
            raise FileExistsError(f'Directory is not empty: {path}. Pass exist_ok=True (--exist-ok) to replace its '
                                  f'contents, or choose an empty directory.')
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)


def _partition_main(index: int, items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]],
                    columns: Mapping[str, str], out: str, writer_kwargs: Mapping[str, Any], queue: Any) -> None:
    """Body of one partition process: write its items, stream progress, then report done or the error."""
    pending = 0
    last = time.monotonic()

    def report(n: int) -> None:
        nonlocal pending, last
        pending += n
        now = time.monotonic()
        if now - last >= _REPORT_EVERY:
            queue.put(('progress', index, pending))
            pending, last = 0, now

    try:
        result = _write(items, produce, columns, out, writer_kwargs, False, report)
        if pending:
            queue.put(('progress', index, pending))
        queue.put(('done', index, result))
    except BaseException as err:  # reported to the parent, which raises ConversionError
        queue.put(('error', index, f'{type(err).__name__}: {err}', traceback.format_exc()))


def _convert_parallel(chunks: list[Sequence[Any]], produce: Callable[[Sequence[Any]], Iterable[Any]],
                      columns: Mapping[str, str], out: str, options: WriterOptions, total: int | None,
                      desc: str) -> ConversionResult:
    context = multiprocessing.get_context('spawn')
    queue = context.Queue()
    parts = [join(out, f'{k:05d}') for k in range(len(chunks))]
    processes = [context.Process(target=_partition_main, name=f'convert-partition-{k}',
                                 args=(k, chunk, produce, dict(columns), parts[k], options.writer_kwargs(), queue))
                 for k, chunk in enumerate(chunks)]
    results: dict[int, tuple[int, int, list[str]]] = {}
    dead_since: dict[int, float] = {}
    try:
        for process in processes:
            process.start()
        with _bar(options, total, f'{desc} ({len(chunks)} workers)') as bar:
            while len(results) < len(processes):
                try:
                    message = queue.get(timeout=0.5)
                except queue_module.Empty:
                    _check_alive(processes, results, dead_since, desc)
                    continue
                kind, index = message[0], message[1]
                if kind == 'progress':
                    bar.update(message[2])
                elif kind == 'done':
                    results[index] = message[2]
                else:
                    logger.debug('Partition %d traceback:\n%s', index, message[3])
                    raise ConversionError(f'{desc}: partition {index} of {len(chunks)} (writing {parts[index]}) '
                                          f'failed: {message[2]}')
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=30)
        queue.close()
    from streaming_core.merge import merge_index
    merge_index(out, storage_options=options.storage_options)
    samples = sum(r[0] for r in results.values())
    skipped = sum(r[1] for r in results.values())
    reasons = [reason for k in sorted(results) for reason in results[k][2]][:_MAX_REASONS]
    _log_skips(desc, skipped, reasons, samples)
    return ConversionResult(out=out, samples=samples, skipped=skipped, partitions=len(chunks), skip_reasons=reasons)


def _check_alive(processes: list[Any], results: Mapping[int, Any], dead_since: dict[int, float], desc: str) -> None:
    """Raise when a partition process died without reporting (killed, out of memory) after a short grace."""
    now = time.monotonic()
    for index, process in enumerate(processes):
        if index in results or process.is_alive():
            continue
        first = dead_since.setdefault(index, now)
        if now - first > _DEATH_GRACE:
            raise ConversionError(f'{desc}: partition process {index} died with exit code {process.exitcode} '
                                  f'before finishing (killed or out of memory?). Nothing was committed for it; run '
                                  f'the conversion again, with fewer workers if memory is short.')
