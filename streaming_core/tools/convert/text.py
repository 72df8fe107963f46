"""JSON-lines and CSV sources, split into byte ranges that start and end on record boundaries.

Uncompressed files are cut anywhere and the cut is moved forward to the next record start: the next newline for
JSON lines (a JSON string cannot hold a raw newline), the next newline outside a quoted field for CSV (one with an
even number of quote characters before it in the file, which holds for RFC 4180 quoting where a quote inside a
field is doubled). Compressed files (``.gz``, ``.bz2``, ``.xz``, ``.zst``) are never cut: each is read whole by one
part.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from streaming_core.tools.convert.base import COMPRESSED_SUFFIXES, Progress, Source, is_compressed, list_files
from streaming_core.tools.convert.columns import INFER_RECORDS, infer_text_columns, infer_value_columns

__all__ = ['JSONLSource', 'CSVSource', 'TextPart', 'next_record_start']

_CHUNK = 1 << 22


@dataclass(frozen=True)
class TextPart:
    """Bytes ``[start, end)`` of the source's concatenated files, as ``(file index, offset)`` positions."""

    start: tuple[int, int]
    end: tuple[int, int]


class _Range(io.RawIOBase):
    """A read-only view of bytes ``[start, end)`` of a file that counts what it has read."""

    def __init__(self, path: str, start: int = 0, end: int | None = None) -> None:
        super().__init__()
        self._file: BinaryIO = open(path, 'rb')  # noqa: SIM115 - closed in close()
        self._file.seek(start)
        self._left = (os.fstat(self._file.fileno()).st_size if end is None else end) - start
        self.consumed = 0
        self.reported = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[:self._left]
        count = self._file.readinto(view) or 0
        self._left -= count
        self.consumed += count
        return count

    def close(self) -> None:
        self._file.close()
        super().close()


def _decompressing(raw: _Range, path: str) -> BinaryIO:
    lower = path.lower()
    if lower.endswith('.gz'):
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if lower.endswith('.bz2'):
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if lower.endswith('.xz'):
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    try:
        import zstandard
    except ImportError as err:
        raise ImportError(f'Reading {path} needs the zstandard package: pip install zstandard') from err
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]


def _quote_parity(path: str, end: int, quote: int) -> int:
    """The number of quote bytes in ``[0, end)`` of the file, modulo 2."""
    count = 0
    with open(path, 'rb') as handle:
        left = end
        while left > 0:
            data = handle.read(min(_CHUNK, left))
            if not data:
                break
            left -= len(data)
            count += data.count(bytes([quote]))
    return count & 1


def next_record_start(path: str, offset: int, quote: bytes | None = None) -> int:
    """The first record start at or after ``offset`` (0 is a record start; the file size means none is left).

    A record starts after a newline; with ``quote``, only after a newline outside quotes (an even number of quote
    bytes before it).
    """
    size = os.path.getsize(path)
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    pos = offset - 1  # a record starts at offset when the byte before it ends a record
    parity = _quote_parity(path, pos, quote[0]) if quote else 0
    with open(path, 'rb') as handle:
        handle.seek(pos)
        while pos < size:
            data = np.frombuffer(handle.read(_CHUNK), np.uint8)
            if not len(data):
                break
            newlines = np.flatnonzero(data == 10)
            if quote:
                quotes = np.cumsum(data == quote[0], dtype=np.int64)
                even = newlines[((quotes[newlines] + parity) & 1) == 0]  # even quotes before the newline
                if len(even):
                    return pos + int(even[0]) + 1
                parity = (parity + int(quotes[-1])) & 1
            elif len(newlines):
                return pos + int(newlines[0]) + 1
            pos += len(data)
    return size


class _TextSource(Source):
    """Shared splitting and reading of line-oriented files."""

    unit = 'B'
    quote: bytes | None = None

    def __init__(self, src: str, suffixes: tuple[str, ...], what: str) -> None:
        self.src = src
        self.files = list_files(src, suffixes, what)
        self.sizes = [os.path.getsize(path) for path in self.files]
        self.total = sum(self.sizes)

    def data_start(self, index: int) -> int:
        """Where records start in file ``index`` (after a header; override)."""
        return 0

    def split(self, parts: int) -> list[TextPart]:
        """Cut into ``parts`` byte ranges on record boundaries (compressed files whole)."""
        cuts = [(0, 0)]
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).tolist()
        for i in range(1, parts):
            target = self.total * i // parts
            f = max(0, min(int(np.searchsorted(starts, target, side='right')) - 1, len(self.files) - 1))
            offset = target - starts[f]
            size = self.sizes[f]
            if is_compressed(self.files[f]):
                cut = (f, 0) if offset < size / 2 else (f + 1, 0)
            else:
                at = next_record_start(self.files[f], max(offset, self.data_start(f)), self.quote)
                cut = (f, at) if at < size else (f + 1, 0)
            cuts.append(max(cut, cuts[-1]))
        cuts.append((len(self.files), 0))
        return [TextPart(cuts[i], cuts[i + 1]) for i in range(parts)]

    def _ranges(self, part: TextPart) -> Iterator[tuple[int, int, int]]:
        (f0, a0), (f1, b1) = part.start, part.end
        for f in range(f0, min(f1, len(self.files) - 1) + 1):
            a = a0 if f == f0 else 0
            b = b1 if f == f1 else self.sizes[f]
            if b > a:
                yield f, a, b

    def _lines(self, f: int, a: int, b: int, progress: Progress) -> Iterator[tuple[io.TextIOWrapper, _Range]]:
        raw = _Range(self.files[f], a, b)
        binary: Any = _decompressing(raw, self.files[f]) if is_compressed(self.files[f]) else io.BufferedReader(raw)
        text = io.TextIOWrapper(binary, encoding='utf-8', newline='')
        try:
            yield text, raw
        finally:
            text.close()
            progress(raw.consumed - raw.reported)

    def describe(self, part: TextPart) -> str:
        """The files and byte ranges of a part."""
        pieces = [f'{self.files[f]} bytes {a}-{b}' for f, a, b in self._ranges(part)]
        return ', '.join(pieces) or 'nothing'


def _report(raw: _Range, progress: Progress) -> None:
    done = raw.consumed
    progress(done - raw.reported)
    raw.reported = done


class JSONLSource(_TextSource):
    """JSON-lines input: one JSON object per line; blank lines are skipped.

    Args:
        src: A ``.jsonl``/``.json``/``.ndjson`` file (optionally compressed), a directory of them, or a glob.
    """

    kind = 'jsonl'

    def __init__(self, src: str) -> None:
        super().__init__(src, ('.jsonl', '.json', '.ndjson'), 'JSON-lines')

    def infer_columns(self) -> dict[str, str]:
        """Infer from the first records (see :mod:`streaming_core.tools.convert.columns`)."""
        records = []
        for record in self.read(TextPart((0, 0), (len(self.files), 0)), lambda n: None):
            records.append(record)
            if len(records) >= INFER_RECORDS:
                break
        return infer_value_columns(records)

    def read(self, part: TextPart, progress: Progress) -> Iterator[dict[str, Any]]:
        """Parse every line of the part."""
        for f, a, b in self._ranges(part):
            for text, raw in self._lines(f, a, b, progress):
                for number, line in enumerate(text, 1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ValueError(f'{self.files[f]}: line {number} after byte {a} is not valid JSON: '
                                         f'{err}') from None
                    if not isinstance(record, dict):
                        raise ValueError(f'{self.files[f]}: line {number} after byte {a} is a '
                                         f'{type(record).__name__}, not a JSON object.')
                    if number % 256 == 0:
                        _report(raw, progress)
                    yield record


class CSVSource(_TextSource):
    """CSV (or other delimiter-separated) input whose first line is a header; every file must have the same one.

    Args:
        src: A ``.csv``/``.tsv`` file (optionally compressed), a directory of them, or a glob.
        delimiter: The field separator (default a comma; a tab for ``.tsv`` files).
    """

    kind = 'csv'
    text_values = True
    quote = b'"'

    def __init__(self, src: str, delimiter: str | None = None) -> None:
        super().__init__(src, ('.csv', '.tsv'), 'CSV')
        if delimiter is None:
            name = self.files[0].lower()
            for suffix in COMPRESSED_SUFFIXES:
                name = name.removesuffix(suffix)
            delimiter = '\t' if name.endswith('.tsv') else ','
        if len(delimiter) != 1:
            raise ValueError(f'The CSV delimiter must be one character, got {delimiter!r}.')
        self.delimiter = delimiter
        self.headers = [self._header(i) for i in range(len(self.files))]
        for path, (header, _) in zip(self.files[1:], self.headers[1:]):
            if header != self.headers[0][0]:
                raise ValueError(f'{path} has the header {header} but {self.files[0]} has {self.headers[0][0]}; '
                                 f'every CSV file of a conversion needs the same columns.')

    def _header(self, index: int) -> tuple[list[str], int]:
        path = self.files[index]
        if is_compressed(path):
            with io.TextIOWrapper(_decompressing(_Range(path), path), encoding='utf-8', newline='') as text:
                row = next(csv.reader(text, delimiter=self.delimiter), None)
            end = 0
        else:
            end = next_record_start(path, 1, self.quote)
            with open(path, 'rb') as handle:
                head = handle.read(end).decode('utf-8')
            row = next(csv.reader(io.StringIO(head, newline=''), delimiter=self.delimiter), None)
        if not row:
            raise ValueError(f'{path} has no header line; the first line of a CSV file must name its columns.')
        if len(set(row)) != len(row):
            raise ValueError(f'{path}: the header {row} names a column twice.')
        return row, end

    @property
    def header(self) -> list[str]:
        """The column names."""
        return self.headers[0][0]

    def data_start(self, index: int) -> int:
        """The byte after the header line of an uncompressed file."""
        return self.headers[index][1]

    def infer_columns(self) -> dict[str, str]:
        """Infer from the first rows: integers, numbers, else text."""
        rows = []
        for record in self.read(TextPart((0, 0), (len(self.files), 0)), lambda n: None):
            rows.append([record[name] for name in self.header])
            if len(rows) >= INFER_RECORDS:
                break
        if not rows:
            raise ValueError(f'{self.src} holds no data rows (only a header); there is nothing to convert.')
        return infer_text_columns(self.header, rows)

    def read(self, part: TextPart, progress: Progress) -> Iterator[dict[str, Any]]:
        """Parse every row of the part into ``{column: text}``."""
        header = self.header
        width = len(header)
        for f, a, b in self._ranges(part):
            compressed = is_compressed(self.files[f])
            start = 0 if compressed else max(a, self.data_start(f))
            if start >= b:
                continue
            for text, raw in self._lines(f, start, b, progress):
                rows = csv.reader(text, delimiter=self.delimiter)
                if compressed:
                    next(rows, None)  # the header
                for number, row in enumerate(rows, 1):
                    if not row:
                        continue
                    if len(row) != width:
                        raise ValueError(f'{self.files[f]}: row {number} after byte {start} has {len(row)} fields '
                                         f'but the header has {width} ({header}).')
                    if number % 256 == 0:
                        _report(raw, progress)
                    yield dict(zip(header, row))
