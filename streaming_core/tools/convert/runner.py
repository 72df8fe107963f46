"""Run a conversion: choose the columns, write one partition per worker process, merge the partition indexes.

With ``workers=1`` the source is written straight into ``out``. With ``workers=N`` it is cut into ``N``
contiguous parts, part ``i`` is written by its own process into ``<out>/<i>/`` (``i`` zero-padded to a common
width, so the merge order is also the lexicographic order ``merge_index(out)`` uses), and
:func:`streaming_core.writing.merge.merge_index` joins them in order: the dataset reads back in the source's order
either way. Writers are looked up by format name in the ``format`` registry; any storage plugin can receive the output.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from streaming_core.common.paths import is_within
from streaming_core.errors import DirectoryNotEmptyError, StreamingError
from streaming_core.storage.facade import exists, is_remote, join, local_path
from streaming_core.storage.redact import redact_repr, redact_url
from streaming_core.tools.convert.base import Source
from streaming_core.tools.convert.columns import (
    INFER_RECORDS,
    adapt_columns,
    check_encoding,
    coercer,
    select_columns,
)

__all__ = ['ConversionError', 'ConvertResult', 'convert_source', 'partition_names']

_REPORT_EVERY = 0.2


class ConversionError(StreamingError, ValueError):
    """A source record cannot be converted (a bad value for its column's encoding, a missing column...)."""


@dataclass
class ConvertResult:
    """What a conversion wrote.

    Attributes:
        out: Where the dataset's ``index.json`` was committed (a local path or a remote URL).
        samples: Samples written.
        shards: Shards written.
        partitions: Partitions written in parallel and merged (1 when written directly).
        columns: The columns and their encodings as the writer stored them.
        format: The shard format.
        seconds: Wall time of the conversion.
    """

    out: str
    samples: int
    shards: int
    partitions: int
    columns: dict[str, str]
    format: str
    seconds: float = 0.0


@dataclass
class _Task:
    source: Source
    part: Any
    out: str | tuple[str, str]
    format: str
    columns: dict[str, str]
    writer_kwargs: dict[str, Any] = field(default_factory=dict)
    inferred: bool = False


def partition_names(count: int) -> list[str]:
    """The partition directory names for ``count`` parts: ``0..count-1`` zero-padded to one width."""
    width = len(str(max(count - 1, 0)))
    return [str(i).zfill(width) for i in range(count)]


def _split_out(out: str | Sequence[str]) -> tuple[str | None, str | None]:
    if isinstance(out, str) and out:
        return (None, out.rstrip('/')) if is_remote(out) else (local_path(out), None)
    if isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(x, str) and x for x in out):
        if is_remote(out[0]):
            raise ValueError(f'Invalid output {redact_repr(out)}: the first element of a (local, remote) pair must '
                             f'be a local directory.')
        return local_path(out[0]), out[1].rstrip('/')
    raise ValueError(f'Invalid output {redact_repr(out)}: give a directory, a URL or a (local, remote) pair.')


def _prepare_out(local: str | None, remote: str | None, exist_ok: bool, options: Mapping[str, Any],
                 inputs: Sequence[str] = ()) -> None:
    """Refuse a non-empty local directory or a remote holding a dataset, unless ``exist_ok`` (then clear local);
    refuse an output that holds the source's ``inputs``, which clearing it would delete."""
    if local is not None and os.path.isdir(local) and os.listdir(local):
        inside = next((path for path in inputs if is_within(path, local)), None)
        if inside is not None:
            raise ValueError(f'The output directory {local} holds the source {inside}: writing there would '
                             f'{"delete" if exist_ok else "mix with"} it. Write to another directory.')
        if not exist_ok:
            raise DirectoryNotEmptyError(
                f'Directory is not empty: {local}. Pass --exist-ok (exist_ok=True) to replace its '
                f'contents, or choose an empty directory.')
        shutil.rmtree(local)
    if remote is not None and exists(join(remote, 'index.json'), timeout=60, options=options):
        if not exist_ok:
            raise DirectoryNotEmptyError(f'The remote output already holds a dataset: '
                                         f'{redact_url(join(remote, "index.json"))}. Pass --exist-ok (exist_ok=True) '
                                         f'to overwrite it.')
        from streaming_core.writing.writer import upload_empty_index  # the merged index, before the partitions
        upload_empty_index(join(remote, 'index.json'), timeout=60, retries=2, options=options)


def _final_columns(source: Source, columns: Mapping[str, str | None] | None, fmt: str) -> dict[str, str]:
    given = dict(columns) if columns else None
    if given and all(encoding is not None for encoding in given.values()):
        chosen = {name: str(encoding) for name, encoding in given.items()}
    else:
        chosen = select_columns(source.infer_columns(), given, f'the {source.kind} source')
    if not chosen:
        raise ValueError(f'The {source.kind} source has no columns to write.')
    if fmt == 'mds':
        for name, encoding in chosen.items():
            check_encoding(encoding, name)
    return adapt_columns(chosen, fmt)


class _Counter:
    """Progress in the parent process (serial runs): updates a tqdm bar directly."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def add(self, count: int) -> None:
        if count and self.bar is not None:
            self.bar.update(count)


class _SharedCounter:
    """Progress from a worker process: adds to a shared integer the parent polls, at most every 0.2 s."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.pending = 0
        self.last = time.monotonic()

    def add(self, count: int) -> None:
        self.pending += count
        now = time.monotonic()
        if now - self.last >= _REPORT_EVERY:
            self.flush()
            self.last = now

    def flush(self) -> None:
        if self.pending:
            with self.value.get_lock():
                self.value.value += self.pending
            self.pending = 0


_shared: Any = None


def _init_worker(value: Any) -> None:
    global _shared
    _shared = value


def _run_shared(task: _Task) -> tuple[int, int]:
    counter = _SharedCounter(_shared)
    try:
        return _write_part(task, counter.add)
    finally:
        counter.flush()


def _write_part(task: _Task, progress: Any) -> tuple[int, int]:
    """Write one part with its own writer; returns ``(samples, shards)``. The index is committed only on success.

    Raises:
        ConversionError: a record that cannot be written: a missing column, a null outside a ``json`` column, a
            value that does not fit its encoding, or (with inferred columns) a key that is not a column.
    """
    from streaming_core.machinery.lookup import get_registry
    writer_cls = get_registry('format').get(task.format).writer
    source = task.source
    plan = [(name, coercer(encoding, text_source=source.text_values), encoding)
            for name, encoding in task.columns.items()]
    names = set(task.columns)
    writer = writer_cls(columns=task.columns, out=task.out, **task.writer_kwargs)
    count = 0
    try:
        for record in source.read(task.part, progress):
            if task.inferred and not record.keys() <= names:
                key = next(key for key in record if key not in names)
                example = ','.join([*task.columns, f'{key}:json'])
                raise ConversionError(f'{source.locate(task.part, count)} has the key {key!r}, which is not one of the '
                                      f'columns inferred from the first {INFER_RECORDS} records '
                                      f'({", ".join(task.columns)}). Pass --columns (columns= in Python) to name every '
                                      f'column to write, such as --columns {_short(example, quote=False)}.')
            sample = {}
            for name, coerce, encoding in plan:
                try:
                    value = record[name]
                except KeyError:
                    if encoding != 'json':
                        raise ConversionError(f'{source.locate(task.part, count)} has no column {name!r} '
                                              f'(columns: {", ".join(task.columns)}).') from None
                    value = None
                if value is None and coerce is not None and encoding != 'json':
                    raise ConversionError(f'{source.locate(task.part, count)}, column {name!r}: the value is null, '
                                          f'which the encoding {encoding} cannot store. Fill or drop the nulls before '
                                          f'converting, or give the column the json encoding with --columns.')
                if coerce is not None:
                    try:
                        value = coerce(value)
                    except (TypeError, ValueError, ArithmeticError) as err:
                        raise ConversionError(f'{source.locate(task.part, count)}, column {name!r}: the value '
                                              f'{_short(value)} does not fit the encoding {encoding} ({err}). Give the '
                                              f'column another encoding with --columns.') from err
                sample[name] = value
            try:
                writer.write(sample)
            except (TypeError, ValueError) as err:
                raise ConversionError(f'{source.locate(task.part, count)} cannot be written as {task.format} '
                                      f'with columns {task.columns}: {err}') from err
            count += 1
    except BaseException:  # commit nothing of a partial write; release the output
        writer.abandon()
        raise
    writer.finish()
    return count, len(writer.shards)


def _short(value: Any, quote: bool = True) -> str:
    text = repr(value) if quote else str(value)
    return text if len(text) <= 60 else text[:57] + '...'


def _bar(source: Source, progress: bool, partitions: int) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm
    scale = source.unit == 'B'
    desc = f'Converting {source.kind}' + (f' ({partitions} processes)' if partitions > 1 else '')
    return tqdm(total=source.total or None, unit=source.unit if scale else f' {source.unit}', unit_scale=scale,
                unit_divisor=1024 if scale else 1000, desc=desc, dynamic_ncols=True)


def convert_source(source: Source, out: str | Sequence[str], *, columns: Mapping[str, str | None] | None = None,
                   format: str = 'mds', compression: str | None = None, hashes: Sequence[str] | None = None,
                   size_limit: int | str | None = 1 << 26, workers: int = 1, exist_ok: bool = False,
                   progress: bool = True, keep_local: bool = False, storage_options: Mapping[str, Any] | None = None,
                   writer_options: Mapping[str, Any] | None = None) -> ConvertResult:
    """Convert ``source`` into a dataset at ``out`` (see the module docstring).

    Args:
        source: What to read.
        out: A local directory, a remote URL, or a ``(local, remote)`` pair.
        columns: ``{name: encoding}`` to write exactly these columns (an encoding of ``None`` keeps the inferred
            one); default: every column with its inferred encoding.
        format: A registered shard format (``mds``, ``json``, ``csv``, ``tsv``...).
        compression: A compression string (``'zstd'``, ``'zstd:7'``...) or None.
        hashes: Hash names to record per file (sorted for the writer).
        size_limit: The shard size limit (bytes or ``'64mb'``).
        workers: Processes writing parts in parallel.
        exist_ok: Replace a non-empty output instead of refusing.
        progress: Show a progress bar.
        keep_local: With a remote, keep the local files after upload.
        storage_options: Options for the remote's storage backend.
        writer_options: Extra keyword arguments for the writer (``newline``, ``max_workers``...).

    Raises:
        ValueError: bad arguments, unusable columns or unconvertible records (:class:`ConversionError`).
        FileExistsError: a non-empty output without ``exist_ok``.
    """
    from streaming_core.machinery.lookup import get_registry
    from streaming_core.writing.merge import merge_index
    started = time.monotonic()
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f'workers must be a positive integer, got {workers!r}.')
    get_registry('format').get(format)  # an unknown format fails here, listing the installed ones
    final = _final_columns(source, columns, format)
    inferred = not columns
    source.configure(final)
    local, remote = _split_out(out)
    options = dict(storage_options or {})
    kwargs: dict[str, Any] = {'compression': compression or None, 'hashes': sorted(hashes) if hashes else None,
                              'size_limit': size_limit, 'exist_ok': exist_ok, 'keep_local': keep_local,
                              'storage_options': options, **dict(writer_options or {})}
    parts = source.split(workers)
    _prepare_out(local, remote, exist_ok, options, source.input_paths())
    if workers == 1:
        bar = _bar(source, progress, 1)
        try:
            samples, shards = _write_part(_Task(source, parts[0], out if isinstance(out, str) else tuple(out),
                                                format, final, kwargs, inferred), _Counter(bar).add)
        finally:
            if bar is not None:
                bar.close()
        where = join(remote, 'index.json') if remote else os.path.join(str(local), 'index.json')
        return ConvertResult(where, samples, shards, 1, final, format, time.monotonic() - started)

    names = partition_names(workers)
    tasks, indexes = [], []
    for name, part in zip(names, parts):
        part_local = os.path.join(local, name) if local is not None else None
        part_remote = join(remote, name) if remote is not None else None
        part_out: str | tuple[str, str] = (part_local, part_remote) if part_local and part_remote else \
            (part_local or part_remote)  # type: ignore[assignment]
        tasks.append(_Task(source, part, part_out, format, final, {**kwargs, 'keep_local': True
                                                                   if local and remote else keep_local}, inferred))
        if part_local and part_remote:
            indexes.append((os.path.join(part_local, 'index.json'), join(part_remote, 'index.json')))
        else:
            indexes.append(os.path.join(part_local, 'index.json') if part_local else join(part_remote, 'index.json'))
    results = _run_parallel(source, tasks, workers, progress)
    merged = merge_index(indexes, out if isinstance(out, str) else tuple(out),
                         keep_local=keep_local if local and remote else True, storage_options=options)
    if local and remote and not keep_local:
        _remove_uploaded_parts(local, names)
    return ConvertResult(merged, sum(r[0] for r in results), sum(r[1] for r in results), workers, final, format,
                         time.monotonic() - started)


def _remove_uploaded_parts(local: str, names: Sequence[str]) -> None:
    """With a (local, remote) output and ``keep_local=False``: drop the local partitions once merged and uploaded."""
    for name in names:
        shutil.rmtree(os.path.join(local, name), ignore_errors=True)


def _run_parallel(source: Source, tasks: list[_Task], workers: int, progress: bool) -> list[tuple[int, int]]:
    context = multiprocessing.get_context()
    shared = context.Value('q', 0)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker,
                             initargs=(shared,)) as pool:
        futures: list[Future[tuple[int, int]]] = [pool.submit(_run_shared, task) for task in tasks]
        bar = _bar(source, progress, workers)
        shown = 0
        try:
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=_REPORT_EVERY, return_when=FIRST_EXCEPTION)
                if bar is not None:
                    value = shared.value
                    bar.update(value - shown)
                    shown = value
                failed = [f for f in futures if f.done() and f.exception() is not None]
                if failed:
                    for future in futures:
                        future.cancel()
                    index = futures.index(failed[0])
                    err = failed[0].exception()
                    if hasattr(err, 'add_note'):
                        err.add_note(f'(while writing partition {index}: {source.describe(tasks[index].part)})')
                    raise err  # type: ignore[misc]
        finally:
            if bar is not None:
                bar.close()
        return [future.result() for future in futures]
