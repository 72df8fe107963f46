"""``XSVWriter`` and its ``CSVWriter`` (``,``) and ``TSVWriter`` (tab) forms (spec 3.2).

Data file: a header line ``separator.join(column_names) + newline``, then one line per sample of the encoded values
joined by the separator. There is no quoting: a separator or newline inside a name or value is refused. Meta file:
``u32 N``, ``u32 offsets[N+1]`` absolute in the data file (the first is the header's length), then the
pyjson-sorted config (with ``separator`` for ``xsv`` only).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import CodecError, MissingColumnError, ShardWriter, pyjson_sorted
from streaming_csv.encodings import XSV_ENCODINGS, xsv_encode

__all__ = ['XSVWriter', 'CSVWriter', 'TSVWriter']

_U32 = struct.Struct('<I')


class XSVWriter(ShardWriter):
    """Write samples to delimiter-separated text shards.

    Args:
        columns: Column name to ``'str'``, ``'int'`` or ``'float'``; columns are written in sorted name order.
        separator: The field separator (any non-empty string).
        newline: The line terminator (default a line feed).
        out, keep_local, compression, hashes, size_limit, **kwargs: As for every writer
            (:class:`~streaming_core.writing.writer.ShardWriter`).
    """

    format = 'xsv'
    part_names = ('data', 'meta')

    def __init__(self, *, columns: Mapping[str, str], separator: str, newline: str = '\n',
                 out: str | Sequence[str], keep_local: bool = False, compression: str | None = None,
                 hashes: list[str] | None = None, size_limit: int | str | None = 1 << 26, **kwargs: Any) -> None:
        if not isinstance(columns, Mapping):
            raise TypeError(f'{type(self).__name__} `columns` must map column names to encodings, got '
                            f'{type(columns).__name__}.')
        if not isinstance(separator, str) or not separator:
            raise ValueError(f'{type(self).__name__} `separator` must be a non-empty string, got {separator!r}.')
        if not isinstance(newline, str) or not newline:
            raise ValueError(f'{type(self).__name__} `newline` must be a non-empty string, got {newline!r}.')
        if not columns:
            raise ValueError(f'{type(self).__name__} `columns` must name at least one column: a line of no fields '
                             f'cannot be told from a line of one empty field.')
        for name, encoding in columns.items():
            if not isinstance(name, str):
                raise TypeError(f'{type(self).__name__} column names must be strings, got {name!r}.')
            if encoding not in XSV_ENCODINGS:
                raise CodecError(f'{type(self).__name__} column {name!r} has encoding {encoding!r}; the '
                                 f'{self.format} format takes {", ".join(XSV_ENCODINGS)}.')
            if separator in name or newline in name:
                raise CodecError(f'Column name {name!r} contains the separator {separator!r} or the newline '
                                 f'{newline!r}; {self.format} shards do not quote fields.')
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        self.columns = dict(zip(self.column_names, self.column_encodings, strict=True))
        self.separator = separator
        self.newline = newline
        self._header = (separator.join(self.column_names) + newline).encode('utf-8')
        self._plan = list(zip(self.column_names, self.column_encodings, strict=True))
        #: A separator that overlaps itself (one that starts with its own end: ``'||'``, ``'aba'``) can also be
        #: found straddling a value and the separator after it (``'x|' + '||' + 'y'`` splits as ``'x'``, ``'|y'``),
        #: so its lines are split back and compared; lines of any other separator split back as they were joined.
        self._overlapping = any(separator[:k] == separator[-k:] for k in range(1, len(separator)))
        super().__init__(out=out, keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)
        self._config_data = pyjson_sorted(self.config).encode('utf-8')

    def get_config(self) -> dict[str, Any]:
        """The shard entry fields of this writer (also appended to each meta file)."""
        config = super().get_config()
        config.update({'column_encodings': self.column_encodings, 'column_names': self.column_names,
                       'newline': self.newline, 'separator': self.separator})
        return config

    def uncounted_bytes_per_shard(self) -> int:
        """The header line, which ``size_limit`` does not count (as in the reference)."""
        return len(self._header)

    def encode_sample(self, sample: Mapping[str, Any]) -> bytes:
        """The sample's line: encoded values joined by the separator, then the newline."""
        fields = []
        separator, newline = self.separator, self.newline
        for name, encoding in self._plan:
            try:
                value = sample[name]
            except KeyError:
                raise MissingColumnError(f'The sample has no column {name!r} (declared columns: '
                                         f'{self.column_names}).') from None
            text = xsv_encode(name, encoding, value)
            if separator in text or newline in text:
                raise CodecError(f'Column {name!r} value {text!r:.60} contains the separator {separator!r} or the '
                                 f'newline {newline!r}; {self.format} shards do not quote fields. Use the JSON or '
                                 f'MDS format for such text.')
            fields.append(text)
        line = separator.join(fields)
        if self._overlapping and line.split(separator) != fields:
            self._refuse_overlap(fields, line.split(separator))
        return (line + newline).encode('utf-8')

    def _refuse_overlap(self, fields: list[str], split: list[str]) -> None:
        """Raise the error naming the first value that an overlapping separator does not split back out."""
        index = next(i for i, (field, part) in enumerate(zip(fields, split, strict=False)) if field != part)
        name, after = self.column_names[index], self.column_names[index + 1]
        raise CodecError(f'Column {name!r} value {fields[index]!r:.60}, followed by column {after!r} value '
                         f'{fields[index + 1]!r:.60}, would read back as {split[index]!r:.60}: joined by the '
                         f'separator {self.separator!r}, the end of one value or the start of the next forms part '
                         f'of a separator, and {self.format} shards do not quote fields. Use a separator that '
                         f'cannot overlap these values, or the JSON or MDS format.')

    def encode_shard(self, samples: Sequence[bytes]) -> dict[str, bytes]:
        """The data (header and lines) and meta (count, absolute offsets, config) files."""
        count = len(samples)
        offsets = np.empty(count + 1, np.int64)
        offsets[0] = len(self._header)
        if count:
            np.cumsum(np.fromiter(map(len, samples), np.int64, count), out=offsets[1:])
            offsets[1:] += offsets[0]
        meta = b''.join([_U32.pack(count), offsets.astype('<u4').tobytes(), self._config_data])
        return {'data': b''.join([self._header, *samples]), 'meta': meta}


class CSVWriter(XSVWriter):
    """Write samples to comma-separated shards (``format: csv``; the separator is implied, not stored)."""

    format = 'csv'
    default_separator = ','

    def __init__(self, *, columns: Mapping[str, str], newline: str = '\n', out: str | Sequence[str],
                 keep_local: bool = False, compression: str | None = None, hashes: list[str] | None = None,
                 size_limit: int | str | None = 1 << 26, **kwargs: Any) -> None:
        super().__init__(columns=columns, separator=self.default_separator, newline=newline, out=out,
                         keep_local=keep_local, compression=compression, hashes=hashes, size_limit=size_limit,
                         **kwargs)

    def get_config(self) -> dict[str, Any]:
        """The XSV config without ``separator``."""
        config = super().get_config()
        del config['separator']
        return config


class TSVWriter(CSVWriter):
    """Write samples to tab-separated shards (``format: tsv``)."""

    format = 'tsv'
    default_separator = '\t'
