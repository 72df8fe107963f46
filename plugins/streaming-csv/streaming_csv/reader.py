"""Reading CSV, TSV and XSV shards: entry validation and memory-mapped access (spec 3.2).

The formats take the ``columns`` option (``Stream(columns=[...])``): samples then hold only those columns, in that
order, and only their fields are decoded (a line is still split whole, and its field count checked).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming_core.plugin_api import (
    MAX_SHARD_BYTES,
    IndexFormatError,
    ShardCorruptError,
    ShardReaderBase,
    SplitShardView,
    checked_projection,
    columns_option,
)
from streaming_csv.encodings import XSV_ENCODINGS, xsv_decoder

__all__ = ['XSVReader', 'CSVReader', 'TSVReader', 'XSVView', 'XSVFormat']

_KEYS = frozenset({'column_encodings', 'column_names', 'compression', 'format', 'hashes', 'newline', 'raw_data',
                   'raw_meta', 'samples', 'size_limit', 'version', 'zip_data', 'zip_meta'})


class XSVReader(ShardReaderBase):
    """One ``xsv`` shard entry (its separator is stored in the entry)."""

    min_bytes_per_sample = 4
    max_file_bytes = MAX_SHARD_BYTES
    format_name = 'xsv'
    entry_keys = _KEYS | {'separator'}
    part_names = ('data', 'meta')
    implied_separator: str | None = None

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate the columns, the newline and the separator."""
        names, encodings = entry['column_names'], entry['column_encodings']
        if not (isinstance(names, list) and isinstance(encodings, list)) or len(names) != len(encodings):
            raise IndexFormatError(f'{where}: column_names and column_encodings must be lists of the same length.')
        if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise IndexFormatError(f'{where}: column_names must be distinct strings, got {names!r}.')
        bad = [e for e in encodings if not isinstance(e, str) or e not in XSV_ENCODINGS]
        if bad:
            raise IndexFormatError(f'{where}: unsupported {self.format_name} encodings {bad}; expected '
                                   f'{", ".join(XSV_ENCODINGS)}.')
        newline = entry['newline']
        if not isinstance(newline, str) or not newline:
            raise IndexFormatError(f'{where}: "newline" must be a non-empty string, got {newline!r}.')
        separator = self.implied_separator if self.implied_separator is not None else entry['separator']
        if not isinstance(separator, str) or not separator:
            raise IndexFormatError(f'{where}: "separator" must be a non-empty string, got {separator!r}.')
        self.column_names: list[str] = list(names)
        self.column_encodings: list[str] = list(encodings)
        self.newline: str = newline
        self.separator: str = separator

    #: The columns a projection keeps, in the order samples hold them (``None``: every column).
    projection: tuple[str, ...] | None = None

    def project(self, columns: Sequence[str]) -> None:
        """Return (and decode) only ``columns``, in that order, from every sample.

        Raises:
            ValueError: a name is not a column of this shard, naming it and the shard's columns.
        """
        self.projection = checked_projection(columns, self.column_names, f'{self.format_name} shard')

    def open(self, paths: Sequence[str]) -> XSVView:
        """Map the local data and meta files and validate the offset table."""
        if len(paths) != 2:
            raise ValueError(f'{self.where}: a {self.format_name} shard has a data and a meta file, got '
                             f'{len(paths)} paths.')
        return XSVView(self, paths[0], paths[1])


class CSVReader(XSVReader):
    """One ``csv`` shard entry (separator ``,``, not stored)."""

    format_name = 'csv'
    entry_keys = _KEYS
    implied_separator = ','


class TSVReader(XSVReader):
    """One ``tsv`` shard entry (separator tab, not stored)."""

    format_name = 'tsv'
    entry_keys = _KEYS
    implied_separator = '\t'


class XSVView(SplitShardView):
    """An opened XSV shard: ``view[i]`` splits line ``i`` and decodes each field."""

    def __init__(self, reader: XSVReader, data_path: str, meta_path: str) -> None:
        header = (reader.separator.join(reader.column_names) + reader.newline).encode('utf-8')
        super().__init__(reader, data_path, meta_path, first_offset=len(header))
        if self._mm[:len(header)] != header:
            self.close()
            raise ShardCorruptError(f'{data_path}: the header line does not list the index\'s columns '
                                    f'{reader.column_names}.')
        self._separator = reader.separator
        self._newline = reader.newline
        self._trim = len(reader.newline)
        self._columns = [(name, xsv_decoder(enc, data_path))
                         for name, enc in zip(reader.column_names, reader.column_encodings, strict=True)]
        self._nfields = len(self._columns)
        #: ``(name, decode, field index)`` of the columns returned (all, or the projection's in its order).
        self._picked = None if reader.projection is None else [
            (name, xsv_decoder(reader.column_encodings[k], data_path), k)
            for name in reader.projection for k in (reader.column_names.index(name),)]

    def __getitem__(self, index: int) -> dict[str, Any]:
        try:
            text = self.get_raw(index).decode('utf-8')
        except UnicodeDecodeError as err:
            raise ShardCorruptError(f'{self.path}: sample {index} is not UTF-8: {err}') from err
        if text.endswith(self._newline):
            text = text[:-self._trim]
        fields = text.split(self._separator)
        if len(fields) != self._nfields:  # the writer refuses separators inside values
            raise ShardCorruptError(f'{self.path}: sample {index} has {len(fields)} fields, expected '
                                    f'{self._nfields}.')
        if self._picked is not None:
            return {name: decode(fields[k]) for name, decode, k in self._picked}
        return {name: decode(field) for (name, decode), field in zip(self._columns, fields, strict=False)}


class XSVFormat:
    """One of the ``csv``, ``tsv`` and ``xsv`` shard formats."""

    _READERS = {'csv': CSVReader, 'tsv': TSVReader, 'xsv': XSVReader}

    #: The format options a stream may give (``Stream(columns=[...])``); see :meth:`configure`.
    option_names = ('columns',)

    def __init__(self, name: str, columns: Sequence[str] | None = None) -> None:
        self.name = name
        self._reader = self._READERS[name]
        self.columns = tuple(columns) if columns is not None else None

    def configure(self, options: Mapping[str, Any]) -> XSVFormat:
        """The format with a stream's options (names among :attr:`option_names`; the core checks them).

        Raises:
            ValueError: ``columns`` is not a non-empty list of distinct names.
        """
        return XSVFormat(self.name, columns_option(options))

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> XSVReader:
        """Validate one index entry and return its reader (projected to :attr:`columns` when set).

        Raises:
            ValueError: a projected column is not in the entry (naming it and the entry's columns).
        """
        reader = self._reader(entry, allow_unsafe_types=allow_unsafe_types, where=where)
        if self.columns is not None:
            reader.project(self.columns)
        return reader

    @property
    def writer(self) -> type:
        """The writer class of this format."""
        from streaming_csv import writer
        return {'csv': writer.CSVWriter, 'tsv': writer.TSVWriter, 'xsv': writer.XSVWriter}[self.name]
