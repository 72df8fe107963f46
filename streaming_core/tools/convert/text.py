"""JSON-lines and CSV sources, split into byte ranges that start and end on record boundaries.

Uncompressed files are cut anywhere and the cut is moved forward to the next record start: the next newline for
JSON lines (a JSON string cannot hold a raw newline), the next newline outside a quoted field for CSV. Quoted fields
are found with the rules of :func:`csv.reader`, scanning from the start of the file: a quote opens a quoted field
only at the start of a field (after a delimiter or a line end), ``""`` inside one is a quote, and a quote inside an
unquoted field (``5" screen``) is an ordinary character. Compressed files (``.gz``, ``.bz2``, ``.xz``, ``.zst``)
are never cut: each is read whole by one part. A UTF-8 byte order mark at the start of a file is skipped.
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


_BOM = b'\xef\xbb\xbf'


def _bom_size(path: str) -> int:
    """3 when the file starts with a UTF-8 byte order mark, else 0."""
    with open(path, 'rb') as handle:
        return len(_BOM) if handle.read(len(_BOM)) == _BOM else 0


def _csv_chunk(chunk: np.ndarray, before: np.ndarray, inside: bool, quote: int,
               delimiter: bytes) -> tuple[np.ndarray, bool]:
    """The newlines of ``chunk`` that end a CSV record, and whether the chunk ends inside a quoted field.

    Quotes are taken in runs of consecutive quote bytes (a chunk never ends inside a run). From outside a quoted
    field, a run at the start of a field opens one and the rest of it is ``""`` pairs (an odd run leaves the field
    open); any other run is literal text. From inside, the run is ``""`` pairs and an odd one closes the field. So
    an odd run at a field start toggles the state, an odd run elsewhere leaves it outside, an even run changes
    nothing: the state after each run follows from cumulative sums, without a Python loop over the bytes.

    Args:
        chunk: The bytes.
        before: The ``len(delimiter)`` bytes preceding the chunk (newlines at the start of the scan).
        inside: Whether the chunk starts inside a quoted field.
        quote: The quote byte.
        delimiter: The field separator, UTF-8 encoded.
    """
    newlines = np.flatnonzero(chunk == 10)
    quotes = np.flatnonzero(chunk == quote)
    if not len(quotes):
        return newlines[:0] if inside else newlines, inside
    breaks = np.flatnonzero(np.diff(quotes) > 1)
    first = quotes[np.concatenate([[0], breaks + 1])]
    last = quotes[np.concatenate([breaks, [len(quotes) - 1]])]
    odd = ((last - first) & 1) == 0
    data = np.concatenate([before, chunk])
    width = len(before)
    prev = data[first + width - 1]
    at_field_start = (prev == 10) | (prev == 13)
    matches = np.ones(len(first), bool)
    for k, byte in enumerate(delimiter):
        matches &= data[first + width - len(delimiter) + k] == byte
    at_field_start |= matches
    toggles = np.cumsum(at_field_start & odd)
    resets = np.maximum.accumulate(np.where(~at_field_start & odd, np.arange(len(first)), -1))
    state = np.where(resets >= 0, toggles - toggles[np.maximum(resets, 0)], toggles + int(inside)) & 1
    runs = np.searchsorted(last, newlines)  # runs ending before each newline
    at_newline = np.where(runs > 0, state[np.maximum(runs - 1, 0)], int(inside))
    return newlines[at_newline == 0], bool(state[-1])


def _csv_record_starts(path: str, offsets: list[int], quote: bytes, delimiter: bytes) -> list[int]:
    """For each of the ascending ``offsets`` (all in ``(0, size)``), the first CSV record start at or after it,
    in one scan from the start of the file (the file size when none is left)."""
    size = os.path.getsize(path)
    result: list[int] = []
    inside = False
    before = np.frombuffer(b'\n' * len(delimiter), np.uint8)
    with open(path, 'rb') as handle:
        pos = _bom_size(path)
        handle.seek(pos)
        while len(result) < len(offsets):
            data = handle.read(_CHUNK)
            if not data:
                break
            while data.endswith(quote):  # a run of quotes is never split between chunks
                more = handle.read(1 << 12)
                if not more:
                    break
                data += more
            chunk = np.frombuffer(data, np.uint8)
            ends, inside = _csv_chunk(chunk, before, inside, quote[0], delimiter)
            starts = ends + (pos + 1)
            while len(result) < len(offsets):
                i = int(np.searchsorted(starts, offsets[len(result)]))
                if i == len(starts):
                    break
                result.append(int(starts[i]))
            before = np.concatenate([before, chunk])[-len(delimiter):]
            pos += len(data)
    return result + [size] * (len(offsets) - len(result))


def next_record_start(path: str, offset: int, quote: bytes | None = None, delimiter: bytes = b',') -> int:
    """The first record start at or after ``offset`` (0 is a record start; the file size means none is left).

    A record starts after a newline; with ``quote`` (CSV), only after a newline outside quoted fields, found with
    the quoting rules of :func:`csv.reader` for ``delimiter`` (see the module docstring).
    """
    size = os.path.getsize(path)
    if offset <= 0:
        return 0
    if offset >= size:
        return size
    if quote:
        return _csv_record_starts(path, [offset], quote, delimiter)[0]
    pos = offset - 1  # a record starts at offset when the byte before it ends a record
    with open(path, 'rb') as handle:
        handle.seek(pos)
        while pos < size:
            data = np.frombuffer(handle.read(_CHUNK), np.uint8)
            if not len(data):
                break
            newlines = np.flatnonzero(data == 10)
            if len(newlines):
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

    def cuttable(self, index: int) -> bool:
        """Whether file ``index`` may be cut inside (compressed files are read whole)."""
        return not is_compressed(self.files[index])

    def record_starts(self, index: int, offsets: list[int]) -> list[int]:
        """The first record start at or after each of the ascending ``offsets`` of file ``index``."""
        return [next_record_start(self.files[index], offset, self.quote) for offset in offsets]

    def split(self, parts: int) -> list[TextPart]:
        """Cut into ``parts`` byte ranges on record boundaries (compressed files whole)."""
        starts = np.concatenate([[0], np.cumsum(self.sizes)]).tolist()
        targets = []
        for i in range(1, parts):
            target = self.total * i // parts
            f = max(0, min(int(np.searchsorted(starts, target, side='right')) - 1, len(self.files) - 1))
            targets.append((f, target - starts[f]))
        wanted: dict[int, list[int]] = {}
        for f, offset in targets:
            if self.cuttable(f):
                wanted.setdefault(f, []).append(max(offset, self.data_start(f)))
        found = {f: iter(self.record_starts(f, offsets)) for f, offsets in wanted.items()}
        cuts = [(0, 0)]
        for f, offset in targets:
            size = self.sizes[f]
            if f in found:
                at = next(found[f])
                cut = (f, at) if at < size else (f + 1, 0)
            else:
                cut = (f, 0) if offset < size / 2 else (f + 1, 0)
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
        text = io.TextIOWrapper(binary, encoding='utf-8-sig' if a == 0 else 'utf-8', newline='')
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
            with io.TextIOWrapper(_decompressing(_Range(path), path), encoding='utf-8-sig', newline='') as text:
                row = next(csv.reader(text, delimiter=self.delimiter), None)
            end = 0
        else:
            end = next_record_start(path, 1, self.quote, self.delimiter.encode('utf-8'))
            with open(path, 'rb') as handle:
                head = handle.read(end).decode('utf-8-sig')
            row = next(csv.reader(io.StringIO(head, newline=''), delimiter=self.delimiter), None)
        if not row:
            raise ValueError(f'{path} has no header line; the first line of a CSV file must name its columns.')
        if len(set(row)) != len(row):
            raise ValueError(f'{path}: the header {row} names a column twice.')
        return row, end

    def cuttable(self, index: int) -> bool:
        """Whether file ``index`` may be cut (uncompressed, with a delimiter that is not a quote or a line end)."""
        return super().cuttable(index) and self.delimiter not in '"\r\n'

    def record_starts(self, index: int, offsets: list[int]) -> list[int]:
        """The first record start at or after each of the ascending ``offsets``, in one scan of the file."""
        size = self.sizes[index]
        inner = [offset for offset in offsets if 0 < offset < size]
        found = iter(_csv_record_starts(self.files[index], inner, self.quote, self.delimiter.encode('utf-8')))
        return [0 if offset <= 0 else size if offset >= size else next(found) for offset in offsets]

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
