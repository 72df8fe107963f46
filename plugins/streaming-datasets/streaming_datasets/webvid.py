"""WebVid (2M/10M): convert the CSV metadata plus the downloaded videos to MDS.

Source layout: the metadata CSV (``results_2M_train.csv``, ``results_2M_val.csv``) with the header
``videoid,name,page_dir,duration,contentUrl``, and a folder of downloaded videos named ``<page_dir>/<videoid>.mp4``::

    webvid/
        results_2M_val.csv
        videos/1066674784/1066674784_31.mp4 ...     (<page_dir>/<videoid>.mp4)

One sample per CSV row whose video exists, in CSV order; rows without a downloaded video are skipped and counted
(``strict`` makes them an error). Stored columns: ``videoid``, ``caption`` (the ``name`` field), ``page_dir``,
``duration`` (ISO 8601, e.g. ``PT00H00M11S``), ``content_url`` (str) and ``video`` (bytes: the file, verbatim).
The CSV is cut into chunks of rows by byte offset (quoted fields may span lines), so a large CSV is never held in
memory and ``workers`` split it evenly.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
from collections.abc import Iterator, Sequence
from typing import Any

from streaming_datasets.cli import add_converter_parser, print_results, writer_options
from streaming_datasets.conversion import (
    ConversionResult,
    Skip,
    SourceLayoutError,
    SplitPlan,
    WriterOptions,
    convert_splits,
)

__all__ = ['convert_webvid', 'csv_chunks', 'register', 'COLUMNS', 'CSV_FIELDS']

COLUMNS = {'videoid': 'str', 'caption': 'str', 'page_dir': 'str', 'duration': 'str', 'content_url': 'str',
           'video': 'bytes'}
#: The CSV fields every row must have.
CSV_FIELDS = ('videoid', 'name', 'page_dir', 'duration', 'contentUrl')


def csv_chunks(path: str, rows_per_chunk: int = 1000) -> tuple[list[str], list[tuple[int, int, int, int]]]:
    """The header and ``(start byte, end byte, first row number, rows)`` chunks of a CSV file's records.

    Records are found by the parity of double quotes (RFC 4180: a quoted field may hold newlines and doubled
    quotes), so every chunk starts and ends on a record boundary.
    """
    chunks: list[tuple[int, int, int, int]] = []
    with open(path, 'rb') as handle:
        header_bytes = _record(handle)
        if not header_bytes:
            raise SourceLayoutError(f'WebVid CSV {path} is empty.')
        header = next(csv.reader([header_bytes.decode('utf-8-sig')]))
        start = handle.tell()
        rows = first = 0
        while True:
            record = _record(handle)
            if not record:
                break
            if record.strip():
                rows += 1
            if rows == rows_per_chunk:
                chunks.append((start, handle.tell(), first, rows))
                start, first, rows = handle.tell(), first + rows, 0
        if rows:
            chunks.append((start, handle.tell(), first, rows))
    return header, chunks


def _record(handle: Any) -> bytes:
    """The next CSV record's bytes (one or more physical lines), or ``b''`` at the end."""
    parts, quotes = [], 0
    while True:
        line = handle.readline()
        if not line:
            return b''.join(parts)
        parts.append(line)
        quotes += line.count(b'"')
        if quotes % 2 == 0:
            return b''.join(parts)


def _safe_part(value: str, what: str, where: str) -> str:
    if not value or value in ('.', '..') or '/' in value or '\\' in value or '\0' in value:
        raise SourceLayoutError(f'{where}: {what} {value!r} cannot name a file or folder.')
    return value


def produce_webvid(items: Sequence[tuple[str, int, int, int, list[str], str, bool]]) -> Iterator[dict[str, Any] | Skip]:
    """Samples for ``(csv, start, end, first row, header, videos folder, strict)`` chunks."""
    for path, start, end, first, header, videos, strict in items:
        with open(path, 'rb') as handle:
            handle.seek(start)
            text = handle.read(end - start).decode('utf-8')
        rows = (row for row in csv.reader(io.StringIO(text, newline='')) if row)
        for number, row in enumerate(rows, first + 1):
            where = f'{path} row {number}'
            if len(row) != len(header):
                raise SourceLayoutError(f'{where}: {len(row)} fields for a header of {len(header)}.')
            record = dict(zip(header, row))
            video_path = os.path.join(videos, _safe_part(record['page_dir'], 'page_dir', where),
                                      _safe_part(record['videoid'], 'videoid', where) + '.mp4')
            try:
                with open(video_path, 'rb') as video:
                    data = video.read()
            except FileNotFoundError:
                if strict:
                    raise SourceLayoutError(f'{where}: video {video_path} was not downloaded (strict mode).') from None
                yield Skip(f'{where}: no video {video_path}')
                continue
            yield {'videoid': record['videoid'], 'caption': record['name'], 'page_dir': record['page_dir'],
                   'duration': record['duration'], 'content_url': record['contentUrl'], 'video': data}


def convert_webvid(csv_path: str, videos: str, out: str, *, split: str = 'train', strict: bool = False,
                   rows_per_chunk: int = 1000, options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert WebVid (CSV metadata + ``<page_dir>/<videoid>.mp4`` files) into ``out/<split>`` (MDS).

    Args:
        csv_path: The metadata CSV (``results_2M_train.csv``...).
        videos: The folder holding ``<page_dir>/<videoid>.mp4``.
        out: The output root (a directory or a remote URL).
        split: The output split name.
        strict: Raise (committing nothing) instead of skipping a row whose video is missing.
        rows_per_chunk: CSV rows per work item (the unit that workers share).
        options: Writer and parallelism options.

    Returns:
        ``{split: what was written}``.
    """
    if not os.path.isfile(csv_path):
        raise SourceLayoutError(f'WebVid metadata CSV {csv_path} does not exist.')
    if not os.path.isdir(videos):
        raise SourceLayoutError(f'WebVid video folder {videos} is not a directory.')
    header, chunks = csv_chunks(csv_path, rows_per_chunk)
    missing = [name for name in CSV_FIELDS if name not in header]
    if missing:
        raise SourceLayoutError(f'{csv_path}: the header {header} lacks {missing}; WebVid CSVs have '
                                f'{",".join(CSV_FIELDS)}.')
    items = [(csv_path, start, end, first, header, videos, strict) for start, end, first, _ in chunks]
    return convert_splits([SplitPlan(split, items, produce_webvid, COLUMNS, total=sum(c[3] for c in chunks),
                                     desc=f'WebVid {split}', unit='rows')], out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('webvid', convert_webvid(args.csv, args.videos, args.out, split=args.split,
                                                  strict=args.strict, options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert webvid``."""
    parser = add_converter_parser(
        subparsers, 'webvid', run=_run, help='convert WebVid (CSV metadata + <page_dir>/<videoid>.mp4) to MDS',
        description='Convert WebVid (the CSV videoid,name,page_dir,duration,contentUrl and the downloaded videos '
                    'VIDEOS/<page_dir>/<videoid>.mp4) to MDS in OUT/<split>. Columns: videoid, caption, page_dir, '
                    'duration, content_url (str), video (bytes).')
    parser.add_argument('csv', help='the metadata CSV, e.g. results_2M_val.csv')
    parser.add_argument('videos', help='the folder holding <page_dir>/<videoid>.mp4')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--split', default='train', help='the output split name (default train)')
    parser.add_argument('--strict', action='store_true', help='fail when a row has no downloaded video')
