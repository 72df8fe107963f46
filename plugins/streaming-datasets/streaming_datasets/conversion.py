"""The conversion engine shared by every recipe: source items in, one MDS dataset (one split) out.

A recipe lists its *items* (files, images, rows, chunks of rows) in source order and gives a *producer*: a
module-level function ``produce(items) -> Iterable[sample dict | Skip]``. With ``workers=1`` the items are written
by one :class:`~streaming_mds.MDSWriter` in this process. With ``workers=N`` they are cut into ``N`` contiguous
partitions written in parallel by ``N`` processes (``spawn``) into ``out/00000``, ``out/00001``, ... and the
partition indexes are merged with :func:`streaming_core.writing.merge.merge_index`, so the merged dataset holds the
samples in exactly the order one process would have written them. One :class:`~streaming_datasets.progress.Progress`
counts records (or items) against their total in both cases.

A converter with several splits lists every split first (:class:`SplitPlan`; listing is where the source layout is
checked) and writes them with :func:`convert_splits`, so a bad split stops the run before any split is written.
``splits`` always names output splits (:func:`select_splits`).

A producer yields :class:`Skip` for a source record it leaves out on purpose (an image that was never downloaded);
skips are counted in the :class:`ConversionResult`, never silent. A conversion that fails commits nothing: no
``index.json`` is written for a partial split (run it again with ``exist_ok``), and neither is one for a split of
which no sample was written (every record skipped: the source paths are wrong).
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
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streaming_core.plugin_api import DirectoryNotEmptyError, StreamingError, storage
from streaming_datasets.progress import Progress

__all__ = ['ConversionResult', 'ConversionError', 'SourceLayoutError', 'Skip', 'SplitPlan', 'convert_split',
           'convert_splits', 'select_splits', 'partition_items', 'WriterOptions', 'DEFAULT_SIZE_LIMIT']

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
        from streaming_core.plugin_api import get_hash, parse_compression, parse_size_limit
        if self.compression:
            parse_compression(self.compression)  # its error says once what was wrong and what is installed
        if self.hashes is not None and (isinstance(self.hashes, str) or list(self.hashes) != sorted(self.hashes)):
            raise ValueError(f'hashes must be a sorted list of hash names, got {self.hashes!r}.')
        for name in self.hashes or ():
            get_hash(name)
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


def select_splits(requested: Sequence[str] | None, available: Sequence[str], *, dataset: str,
                  unknown: str = '{dataset} split {name!r} is not in the source (found: {found}).',
                  aliases: Mapping[str, str] | None = None, default: Sequence[str] | None = None) -> list[str]:
    """The output splits to convert: ``default`` (else every one of ``available``) when ``requested`` is None.

    ``splits``/``--splits`` means the same for every converter: the names of the *output* splits, i.e. the folders
    under ``out/`` and the ``split=`` of the streaming classes. A source spelling of a split (ADE20K's
    ``training``, C4's ``validation``) is still accepted, mapped to its output name with a :class:`FutureWarning`.

    Args:
        requested: The names asked for, or None for all.
        available: The output split names the source has.
        dataset: The dataset's name (for messages).
        unknown: The message for a name that is not available (``{dataset}``, ``{name}``, ``{found}``).
        aliases: Source spelling -> output name (deprecated spellings).
        default: The splits of a full conversion (default: all of ``available``).

    Raises:
        SourceLayoutError: a requested split is not available, or is asked for twice.
    """
    if requested is None:
        return list(available if default is None else default)
    if isinstance(requested, str):
        requested = [requested]
    chosen: list[str] = []
    for name in requested:
        if name not in available and aliases and name in aliases:
            warnings.warn(f'{dataset}: splits/--splits takes output split names; {name!r} is the source spelling of '
                          f'{aliases[name]!r}. Use {aliases[name]!r} (the spelling {name!r} will stop working).',
                          FutureWarning, stacklevel=3)
            name = aliases[name]
        if name not in available:
            raise SourceLayoutError(unknown.format(dataset=dataset, name=name, found=', '.join(available) or 'none'))
        if name in chosen:
            raise SourceLayoutError(f'{dataset}: split {name!r} is asked for twice.')
        chosen.append(name)
    return chosen


@dataclass(frozen=True)
class SplitPlan:
    """One split to convert, listed (and so checked) in full before any split is written.

    Attributes:
        name: The output split (written to ``out/<name>``).
        items: The source items in source order (see :func:`convert_split`).
        produce: The module-level producer of the items.
        columns: The MDS columns.
        total: The number of records the producer yields (samples plus skips), or None when unknown (the progress
            then counts items).
        desc: The progress label.
        unit: What a record is called in the progress bar.
        item_unit: What an item is called in the progress bar (when ``total`` is None).
    """

    name: str
    items: Sequence[Any]
    produce: Callable[[Sequence[Any]], Iterable[Mapping[str, Any] | Skip]]
    columns: Mapping[str, str]
    total: int | None = None
    desc: str = 'Converting'
    unit: str = 'records'
    item_unit: str = 'items'


def convert_splits(plans: Sequence[SplitPlan], out: str,
                   options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert several splits into ``out/<split>``, after checking all of them: the one way converters write.

    A converter lists every split's items first (which is where it checks the source layout: a flat ImageNet
    ``val/``, a missing mask, a missing batch file), then calls this. Before anything is written, every split must
    have items and every output directory must be empty (or ``exist_ok``), so a bad split or output never leaves the
    splits before it converted and the run half done.

    Raises:
        SourceLayoutError: a split has no items, or two plans name the same split.
        FileExistsError: an output is not empty and ``exist_ok`` is not set.
    """
    options = options or WriterOptions()
    seen: set[str] = set()
    for plan in plans:
        if plan.name in seen:
            raise SourceLayoutError(f'{plan.desc}: split {plan.name!r} is converted twice.')
        seen.add(plan.name)
        if not plan.items:
            raise SourceLayoutError(f'{plan.desc}: nothing to convert (no source items were found).')
    for plan in plans:
        _check_output(storage.join(out, plan.name), options)
    return {plan.name: convert_split(plan.items, plan.produce, plan.columns, storage.join(out, plan.name), options,
                                     total=plan.total, desc=plan.desc, unit=plan.unit, item_unit=plan.item_unit)
            for plan in plans}


def convert_split(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Mapping[str, Any] | Skip]],
                  columns: Mapping[str, str], out: str, options: WriterOptions | None = None, *,
                  total: int | None = None, desc: str = 'Converting', unit: str = 'records',
                  item_unit: str = 'items') -> ConversionResult:
    """Write the samples that ``produce`` makes from ``items`` as one MDS dataset in ``out``.

    Args:
        items: The source items in source order (picklable when ``options.workers > 1``).
        produce: A module-level function ``produce(items)`` yielding sample dicts (or :class:`Skip`); it should
            iterate ``items`` lazily (the progress counts the items it has taken).
        columns: The MDS columns (name -> encoding).
        out: A local directory or a remote URL (written through the storage registry).
        options: Writer and engine options.
        total: The number of records ``produce`` yields, samples plus skips (None when unknown: the progress then
            counts items).
        desc: The progress bar's label.
        unit: What a record is called in the progress bar.
        item_unit: What an item is called in the progress bar.

    Raises:
        SourceLayoutError: ``items`` is empty, or no sample was written (every record skipped, or none found);
            nothing is committed then.
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
    _check_output(out, options)
    _prepare_root(out, options)
    progress = Progress(desc, records=total, items=len(items), unit=unit, item_unit=item_unit,
                        enabled=options.progress)
    with progress:
        if len(chunks) == 1:
            return _convert_here(items, produce, columns, out, options, desc, progress)
        return _convert_parallel(chunks, produce, columns, out, options, desc, progress)


# ----------------------------------------------------------------------------------------------------------------
class _Tracked(Sequence[Any]):
    """``items`` as the producer sees them: taking item ``k + 1`` (or reaching the end) reports item ``k`` done."""

    def __init__(self, items: Sequence[Any], done: Callable[[int], None]) -> None:
        self._items = items
        self._done = done

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, at: Any) -> Any:
        return self._items[at]

    def __iter__(self) -> Iterator[Any]:
        for n, item in enumerate(self._items):
            if n:
                self._done(1)
            yield item
        if len(self._items):
            self._done(1)


def _no_samples(desc: str, skipped: int, reasons: list[str]) -> SourceLayoutError:
    if skipped:
        return SourceLayoutError(f'{desc}: no sample was written: all {skipped} source record(s) were skipped (first: '
                                 f'{reasons[0]}). Nothing was committed; check the source paths and their order.')
    return SourceLayoutError(f'{desc}: no sample was written: the source holds no records. Nothing was committed.')


def _write(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]], columns: Mapping[str, str],
           out: str, writer_kwargs: Mapping[str, Any], exist_ok: bool, report: Callable[[int, int, int], None],
           allow_empty: bool = False, desc: str = 'Converting') -> tuple[int, int, list[str]]:
    """Write one dataset; returns ``(samples, skipped, first skip reasons)``; ``report(samples, skipped, items)``
    gets progress. Without ``allow_empty``, writing no sample is an error and commits nothing."""
    from streaming_mds import MDSWriter
    samples = skipped = 0
    reasons: list[str] = []
    writer = MDSWriter(out=out, columns=dict(columns), exist_ok=exist_ok, **writer_kwargs)
    # Not a `with` block: on an error the writer must not commit index.json for a partial conversion.
    try:
        for sample in produce(_Tracked(items, lambda n: report(0, 0, n))):
            if isinstance(sample, Skip):
                skipped += 1
                if len(reasons) < _MAX_REASONS:
                    reasons.append(sample.reason)
                report(0, 1, 0)
                continue
            writer.write(sample)
            samples += 1
            report(1, 0, 0)
        if not samples and not allow_empty:
            raise _no_samples(desc, skipped, reasons)
    except BaseException:  # commit nothing of a partial write; release the output
        writer.abandon()
        raise
    writer.finish()
    return samples, skipped, reasons


def _convert_here(items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]],
                  columns: Mapping[str, str], out: str, options: WriterOptions, desc: str,
                  progress: Progress) -> ConversionResult:
    samples, skipped, reasons = _write(items, produce, columns, out, options.writer_kwargs(), options.exist_ok,
                                       progress.update, desc=desc)
    _log_skips(desc, skipped, reasons)
    return ConversionResult(out=out, samples=samples, skipped=skipped, partitions=1, skip_reasons=reasons)


def _log_skips(desc: str, skipped: int, reasons: list[str]) -> None:
    # INFO, not WARNING: the counts are in the result, the progress bar and the command's one line per split.
    if skipped:
        logger.info('%s: skipped %d source record(s); first: %s', desc, skipped, '; '.join(reasons[:3]))


def _check_output(out: str, options: WriterOptions) -> None:
    """Refuse a non-empty output (without ``exist_ok``) before anything is written anywhere."""
    if options.exist_ok:
        return
    if storage.is_remote(out):
        if storage.exists(storage.join(out, 'index.json'), options=options.storage_options):
            raise DirectoryNotEmptyError(
                f'The remote output already holds a dataset: {storage.join(out, "index.json")}. Pass '
                f'exist_ok=True (--exist-ok) to overwrite it, or choose another location.')
        return
    path = storage.local_path(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f'Conversion output {path} exists and is not a directory.')
    if os.path.isdir(path) and os.listdir(path):
        raise DirectoryNotEmptyError(f'Directory is not empty: {path}. Pass exist_ok=True (--exist-ok) to replace its '
                                     f'contents, or choose an empty directory.')


def _prepare_root(out: str, options: WriterOptions) -> None:
    """Clear (with ``exist_ok``) and create a local output; :func:`_check_output` has refused what it must."""
    if storage.is_remote(out):
        return
    path = storage.local_path(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f'Conversion output {path} exists and is not a directory.')
    if os.path.isdir(path) and os.listdir(path):
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)


def _partition_main(index: int, items: Sequence[Any], produce: Callable[[Sequence[Any]], Iterable[Any]],
                    columns: Mapping[str, str], out: str, writer_kwargs: Mapping[str, Any], queue: Any) -> None:
    """Body of one partition process: write its items, stream progress, then report done or the error."""
    pending = [0, 0, 0]  # samples, skipped, items not yet sent
    last = time.monotonic()

    def report(samples: int, skipped: int, items_done: int) -> None:
        nonlocal last
        pending[0] += samples
        pending[1] += skipped
        pending[2] += items_done
        now = time.monotonic()
        if now - last >= _REPORT_EVERY:
            queue.put(('progress', index, tuple(pending)))
            pending[:], last = [0, 0, 0], now

    try:
        # A partition may legitimately write nothing (all its records skipped); the parent checks the total.
        result = _write(items, produce, columns, out, writer_kwargs, False, report, allow_empty=True)
        if any(pending):
            queue.put(('progress', index, tuple(pending)))
        queue.put(('done', index, result))
    except BaseException as err:  # reported to the parent, which raises ConversionError
        queue.put(('error', index, f'{type(err).__name__}: {err}', traceback.format_exc()))


def _convert_parallel(chunks: list[Sequence[Any]], produce: Callable[[Sequence[Any]], Iterable[Any]],
                      columns: Mapping[str, str], out: str, options: WriterOptions, desc: str,
                      progress: Progress) -> ConversionResult:
    context = multiprocessing.get_context('spawn')
    queue = context.Queue()
    parts = [storage.join(out, f'{k:05d}') for k in range(len(chunks))]
    processes = [context.Process(target=_partition_main, name=f'convert-partition-{k}',
                                 args=(k, chunk, produce, dict(columns), parts[k], options.writer_kwargs(), queue))
                 for k, chunk in enumerate(chunks)]
    results: dict[int, tuple[int, int, list[str]]] = {}
    dead_since: dict[int, float] = {}
    try:
        for process in processes:
            process.start()
        while len(results) < len(processes):
            try:
                message = queue.get(timeout=0.5)
            except queue_module.Empty:
                _check_alive(processes, results, dead_since, desc)
                continue
            kind, index = message[0], message[1]
            if kind == 'progress':
                progress.update(*message[2])
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
    samples = sum(r[0] for r in results.values())
    skipped = sum(r[1] for r in results.values())
    reasons = [reason for k in sorted(results) for reason in results[k][2]][:_MAX_REASONS]
    if not samples:
        raise _no_samples(desc, skipped, reasons)  # the partitions' indexes are never merged: nothing committed
    from streaming_core import merge_index
    merge_index(out, storage_options=options.storage_options)
    _log_skips(desc, skipped, reasons)
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
