"""``streaming inspect DATASET``: what a dataset holds, from its index alone (nothing else is downloaded).

Our ``index.json`` is streamed (one shard entry decoded at a time, :mod:`streaming_core.reading.index_file_stream`), so
an index of millions of shards is summarised without one Python object per shard (unless ``--shards`` lists them).
Another library's ``index.json`` and a directory that indexes itself go through the index their builder derives.

Units that share a file. An index entry is a *unit* (what shuffles and batching see); a format may cut a file into
several units that name it (a Parquet file's row groups, :mod:`streaming_core.reading.catalogue`). Consecutive units
naming the same files are one file here: its bytes, its compression and the largest file are counted once, and the
counts say units and files where they differ (``parquet (6 row groups in 2 files)``, the word from the format's
optional ``unit_word``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from typing import Any

from streaming_core.tools.commands._common import (
    add_format_option,
    add_storage_option,
    entry_columns,
    first_line,
    human_bytes,
    locate_index_file,
    open_located_index,
    storage_options,
)

__all__ = ['add_parser', 'run', 'summarize', 'summarize_file', 'locate_index_file', 'entry_files', 'units_word']


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'inspect', help='show a dataset\'s formats, columns, shards, samples, sizes, compression and hashes',
        description='Summarise a dataset from its index.json: shard formats, columns and their encodings, shard and '
                    'sample counts, raw and compressed bytes, compression and hashes. Works on a local directory or '
                    'a remote URL (only the index is downloaded).')
    parser.add_argument('dataset', metavar='DATASET', help='a dataset directory, its index.json, or a remote URL')
    parser.add_argument('--split', default=None, help='a split subdirectory of DATASET')
    add_format_option(parser)
    parser.add_argument('--shards', action='store_true', help='also list every shard')
    parser.add_argument('--json', action='store_true', help='print JSON instead of text')
    add_storage_option(parser)
    parser.set_defaults(run=run)


def entry_files(entry: dict[str, Any]) -> tuple[Any, ...]:
    """The names of the files an index entry is stored as: consecutive entries with equal names are units of one
    file (counted, downloaded and checked once)."""
    return tuple(entry[key].get('basename') if isinstance(entry.get(key), dict) else None
                 for key in ('raw_data', 'zip_data', 'raw_meta', 'zip_meta'))


def units_word(formats: Any) -> str:
    """How to name several units (index entries) of these formats in messages: the plural of the format's
    ``unit_word`` (``'row group'`` -> ``'row groups'``) when there is one format that declares it, else
    ``'units'``."""
    names = {name for name in formats if isinstance(name, str)}
    if len(names) == 1:
        from streaming_core.machinery.lookup import get_registry
        try:
            word = getattr(get_registry('format').get(names.pop()), 'unit_word', None)
        except Exception:  # an unknown format (its plugin not installed): the generic word
            word = None
        if isinstance(word, str) and word:
            return f'{word}s'
    return 'units'


def _shard_row(number: int, entry: dict[str, Any]) -> dict[str, Any]:
    raw = [entry.get(key) for key in ('raw_data', 'raw_meta') if isinstance(entry.get(key), dict)]
    zipped = [entry.get(key) for key in ('zip_data', 'zip_meta') if isinstance(entry.get(key), dict)]
    return {'shard': number, 'file': (zipped or raw or [{}])[0].get('basename'), 'format': entry.get('format'),
            'samples': int(entry.get('samples') or 0), 'raw_bytes': sum(int(f.get('bytes') or 0) for f in raw),
            'zip_bytes': sum(int(f.get('bytes') or 0) for f in zipped) if zipped else None,
            'compression': entry.get('compression'), 'hashes': list(entry.get('hashes') or []),
            'file_shard': number}


class _Summary:
    """The summary built one shard entry at a time: counters and sets, no object per shard (unless the shard list
    is asked for). Consecutive entries naming the same files (units of one file) count the file once."""

    def __init__(self, keep_rows: bool) -> None:
        self.keep_rows = keep_rows
        self.rows: list[dict[str, Any]] = []
        self.layouts: list[dict[str, str]] = []
        self.formats: Counter[Any] = Counter()
        self.format_files: Counter[Any] = Counter()
        self.compression: Counter[str] = Counter()
        self.hashes: set[str] = set()
        self.size_limits: set[str] = set()
        self.shards = self.samples = self.raw = self.zipped = self.compressed_shards = self.largest = 0
        self.raw_of_zipped = 0  # the raw bytes of the compressed files alone (their ratio)
        self.files = 0
        self._last: tuple[Any, ...] | None = None
        self._last_shard = 0
        self.min_samples: int | None = None
        self.max_samples: int | None = None

    def add(self, entry: dict[str, Any]) -> None:
        """Count one shard entry (its files only when the previous entry did not name the same ones)."""
        row = _shard_row(self.shards, entry)
        files = entry_files(entry)
        same_file = files == self._last and any(files)
        if same_file:
            row['file_shard'] = self._last_shard
        else:
            self._last, self._last_shard = files, self.shards
        self.shards += 1
        if self.keep_rows:
            self.rows.append(row)
        columns = entry_columns(entry)
        if columns not in self.layouts:
            self.layouts.append(columns)
        count = row['samples']
        self.samples += count
        self.min_samples = count if self.min_samples is None else min(self.min_samples, count)
        self.max_samples = count if self.max_samples is None else max(self.max_samples, count)
        self.formats[row['format']] += 1
        self.hashes.update(row['hashes'])
        self.size_limits.add(str(entry.get('size_limit')))
        if same_file:
            return
        self.files += 1
        self.format_files[row['format']] += 1
        self.raw += row['raw_bytes']
        if row['zip_bytes'] is not None:
            self.zipped += row['zip_bytes']
            self.raw_of_zipped += row['raw_bytes']
            self.compressed_shards += 1
        self.largest = max(self.largest, (row['zip_bytes'] or 0) + row['raw_bytes'])
        if row['compression']:
            self.compression[str(row['compression'])] += 1

    def result(self, location: str, index_bytes: int) -> dict[str, Any]:
        """The summary (see :func:`summarize`)."""
        return {
            'index': location,
            'index_bytes': index_bytes,
            'formats': dict(self.formats),
            'columns': self.layouts[0] if len(self.layouts) == 1 else self.layouts,
            'shards': self.shards,
            'files': self.files,
            'files_per_format': dict(self.format_files),
            'samples': self.samples,
            'samples_per_shard': {'min': self.min_samples, 'max': self.max_samples,
                                  'mean': self.samples / self.shards} if self.shards else None,
            'raw_bytes': self.raw,
            'zip_bytes': self.zipped if self.compressed_shards else None,
            'raw_bytes_compressed': self.raw_of_zipped if self.compressed_shards else None,
            'largest_shard_bytes': self.largest,
            'compression': dict(self.compression),
            'hashes': sorted(self.hashes),
            'size_limits': sorted(self.size_limits),
            'shard_list': self.rows,
        }


def summarize(index: dict[str, Any], location: str, index_bytes: int) -> dict[str, Any]:
    """The summary ``streaming inspect`` prints, as a dict (also its ``--json`` output)."""
    summary = _Summary(keep_rows=True)
    for entry in index['shards']:
        summary.add(entry)
    return summary.result(location, index_bytes)


def summarize_file(path: str, location: str, keep_rows: bool = True) -> dict[str, Any]:
    """:func:`summarize` of the ``index.json`` at ``path``, streamed: one shard entry decoded at a time
    (:func:`streaming_core.reading.index_file_stream.iter_index_entries`), so an index of millions of shards is
    summarised in bounded memory (``keep_rows=False``: no shard list).

    Raises:
        IndexFormatError: the file is not a valid streaming index (including another library's ``index.json``).
    """
    from streaming_core.errors import IndexFormatError
    from streaming_core.reading.index_file_stream import iter_index_entries
    summary = _Summary(keep_rows)
    with open(path, 'rb') as handle:
        for entry in iter_index_entries(handle, location):
            if not isinstance(entry, dict):
                raise IndexFormatError(f'Index file at {location}: "shards" must be a list of objects.')
            summary.add(entry)
        size = os.fstat(handle.fileno()).st_size
    return summary.result(location, size)


def _files(count: int) -> str:
    return f'{count} file{"" if count == 1 else "s"}'


def _print(summary: dict[str, Any], with_shards: bool) -> None:
    if summary.get('derived'):
        print(f'Dataset index: none; derived from the files of {summary["index"]}')
    else:
        print(f'Dataset index: {summary["index"]} ({human_bytes(summary["index_bytes"])})')
    shared = summary['files'] != summary['shards']  # units share files: say units and files
    formats = ', '.join(
        f'{name} ({count} {units_word([name])} in {_files(summary["files_per_format"].get(name, 0))})'
        if summary['files_per_format'].get(name, 0) != count else f'{name} ({count} shards)'
        for name, count in summary['formats'].items())
    print(f'Format:        {formats or "-"}')
    layouts = summary['columns'] if isinstance(summary['columns'], list) else [summary['columns']]
    for i, columns in enumerate(layouts):
        title = 'Columns:' if len(layouts) == 1 else f'Columns ({i + 1}):'
        print(f'{title:<15}' + first_line([f'{name} ({encoding})' for name, encoding in columns.items()]))
    units = units_word(summary['formats']) if shared else 'shards'
    if shared:
        print(f'Shards:        {summary["shards"]} {units} in {_files(summary["files"])}')
    else:
        print(f'Shards:        {summary["shards"]}')
    per = summary['samples_per_shard']
    each = units[:-1] if shared else 'shard'
    extra = f' (per {each}: min {per["min"]}, mean {per["mean"]:.1f}, max {per["max"]})' if per else ''
    print(f'Samples:       {summary["samples"]}{extra}')
    print(f'Raw bytes:     {human_bytes(summary["raw_bytes"])} ({summary["raw_bytes"]} B)')
    if summary['zip_bytes'] is not None:
        raw = summary.get('raw_bytes_compressed') or summary['raw_bytes']  # of the compressed files alone
        ratio = raw / summary['zip_bytes'] if summary['zip_bytes'] else 0.0
        print(f'Compressed:    {human_bytes(summary["zip_bytes"])} ({summary["zip_bytes"]} B, ratio {ratio:.2f})')
    compression = ', '.join(f'{name} ({_files(count) if shared else f"{count} shards"})'
                            for name, count in summary['compression'].items())
    print(f'Compression:   {compression or "none"}')
    print(f'Hashes:        {first_line(summary["hashes"]) if summary["hashes"] else "none"}')
    largest = 'Largest file: ' if shared else 'Largest shard:'
    print(f'{largest} {human_bytes(summary["largest_shard_bytes"])} (raw + compressed on disk)')
    if with_shards:
        print()
        print(f'{"shard":>6} {"samples":>8} {"raw":>11} {"compressed":>11}  file')
        for row in summary['shard_list']:
            if row['file_shard'] != row['shard']:  # another unit of the file above: its bytes counted there
                print(f'{row["shard"]:>6} {row["samples"]:>8} {"":>11} {"":>11}  {row["file"]} (same file as shard '
                      f'{row["file_shard"]})')
                continue
            zipped = human_bytes(row['zip_bytes']) if row['zip_bytes'] is not None else '-'
            print(f'{row["shard"]:>6} {row["samples"]:>8} {human_bytes(row["raw_bytes"]):>11} {zipped:>11}  '
                  f'{row["file"]}')


def run(args: argparse.Namespace) -> int:
    """Print the summary."""
    from streaming_core.errors import IndexFormatError
    keep_rows = bool(args.shards)
    with tempfile.TemporaryDirectory(prefix='streaming-inspect-') as scratch:
        options = storage_options(args)
        found_file = locate_index_file(args.dataset, args.split, options, scratch)
        summary = None
        if found_file is not None:
            try:  # our index, streamed: no object per shard
                summary = summarize_file(found_file[0], found_file[1], keep_rows)
            except IndexFormatError:  # another library's index.json, or a broken one: the general path decides
                summary = None
        if summary is None:
            found = open_located_index(found_file, args.dataset, args.split, options, fmt=args.format)
            summary = summarize(found.index, found.location, found.index_bytes)
            summary['derived'] = found_file is None  # no index.json: the index a format derives from its files
    if args.json:
        if not args.shards:
            summary.pop('shard_list')
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, args.shards)
    return 0
