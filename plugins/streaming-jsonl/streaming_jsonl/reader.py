"""Reading JSON-lines shards: entry validation (:class:`JSONReader`) and memory-mapped access (:class:`JSONView`).

The format takes the ``columns`` option (``Stream(columns=[...])``): samples then hold only those columns, in that
order. A JSON line is parsed whole (JSON has no column offsets), so the projection saves the memory of the other
values, not their parsing.
"""

from __future__ import annotations

import json
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

__all__ = ['JSONReader', 'JSONView', 'JSONFormat']

#: What a JSON line's value may be for each column encoding (the writer checks the same on write).
_TYPES: dict[str, type | tuple[type, ...]] = {'str': str, 'int': int, 'float': float}


class JSONReader(ShardReaderBase):
    """One ``json`` shard entry: a data file of lines and its ``.meta`` offset file."""

    min_bytes_per_sample = 4
    max_file_bytes = MAX_SHARD_BYTES
    format_name = 'json'
    entry_keys = frozenset({'columns', 'compression', 'format', 'hashes', 'newline', 'raw_data', 'raw_meta',
                            'samples', 'size_limit', 'version', 'zip_data', 'zip_meta'})
    part_names = ('data', 'meta')

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate ``columns`` and ``newline``."""
        columns = entry['columns']
        if not isinstance(columns, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in columns.items()):
            raise IndexFormatError(f'{where}: "columns" must map column names to encodings, got {columns!r}.')
        newline = entry['newline']
        if not isinstance(newline, str) or not newline:
            raise IndexFormatError(f'{where}: "newline" must be a non-empty string, got {newline!r}.')
        self.columns: dict[str, str] = dict(columns)
        self.newline: str = newline

    #: The columns a projection keeps, in the order samples hold them (``None``: every column).
    projection: tuple[str, ...] | None = None

    def project(self, columns: Sequence[str]) -> None:
        """Return only ``columns`` (in that order) from every sample.

        Raises:
            ValueError: a name is not a column of this shard, naming it and the shard's columns.
        """
        self.projection = checked_projection(columns, self.columns, 'json shard')

    def open(self, paths: Sequence[str]) -> JSONView:
        """Map the local data and meta files and validate the offset table."""
        if len(paths) != 2:
            raise ValueError(f'{self.where}: a json shard has a data and a meta file, got {len(paths)} paths.')
        return JSONView(self, paths[0], paths[1])


class JSONView(SplitShardView):
    """An opened JSON shard: ``view[i]`` is ``json.loads`` of line ``i`` (without its newline)."""

    def __init__(self, reader: JSONReader, data_path: str, meta_path: str) -> None:
        super().__init__(reader, data_path, meta_path)
        self._trim = len(reader.newline.encode('utf-8'))
        self._newline = reader.newline.encode('utf-8')
        self._keys = set(reader.columns)
        self._checks = [(name, _TYPES.get(encoding, object)) for name, encoding in reader.columns.items()]
        self._projection = reader.projection

    def __getitem__(self, index: int) -> dict[str, Any]:
        line = self.get_raw(index)
        if line.endswith(self._newline):
            line = line[:-self._trim]
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise ShardCorruptError(f'{self.path}: sample {index} is not valid JSON: {err}') from err
        if type(obj) is not dict or obj.keys() != self._keys:
            raise ShardCorruptError(f'{self.path}: sample {index} is not an object with exactly the columns '
                                    f'{sorted(self._keys)}.')
        for name, kind in self._checks:
            if not isinstance(obj[name], kind):
                raise ShardCorruptError(f'{self.path}: sample {index} column {name!r} holds '
                                        f'{type(obj[name]).__name__}, not the declared type.')
        if self._projection is not None:
            return {name: obj[name] for name in self._projection}
        return obj


class JSONFormat:
    """The ``json`` shard format."""

    name = 'json'
    #: The format options a stream may give (``Stream(columns=[...])``); see :meth:`configure`.
    option_names = ('columns',)

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        self.columns = tuple(columns) if columns is not None else None

    def configure(self, options: Mapping[str, Any]) -> JSONFormat:
        """The format with a stream's options (names among :attr:`option_names`; the core checks them).

        Raises:
            ValueError: ``columns`` is not a non-empty list of distinct names.
        """
        return JSONFormat(columns_option(options))

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> JSONReader:
        """Validate one index entry and return its reader (projected to :attr:`columns` when set).

        Raises:
            ValueError: a projected column is not in the entry (naming it and the entry's columns).
        """
        reader = JSONReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)
        if self.columns is not None:
            reader.project(self.columns)
        return reader

    @property
    def writer(self) -> type:
        """The :class:`~streaming_jsonl.writer.JSONWriter` class."""
        from streaming_jsonl.writer import JSONWriter
        return JSONWriter
