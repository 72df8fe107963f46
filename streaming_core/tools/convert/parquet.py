"""Parquet source: files read with pyarrow, split into exact row ranges (read one row group at a time).

Column encodings follow the Arrow type:

==================================================  ==================
Arrow type                                          MDS encoding
==================================================  ==================
int8 ... int64, uint8 ... uint64                    the same name
float16, float32, float64                           the same name
string, large_string                                ``str``
binary, large_binary, fixed_size_binary             ``bytes``
decimal                                             ``str_decimal``
date, time, timestamp                               ``str`` (ISO 8601)
list of numbers (any depth: 2-D arrays too)         ``ndarray:<dtype>``
bool, struct, map, other lists, null                ``json``
dictionary (categorical)                            that of its values
==================================================  ==================

Every file must have the first file's columns, in the same order and with the same types. A null in a number,
text, bytes or ``ndarray`` column stops the conversion (``json`` columns store it). Hive-style partition
directories (``date=2024-01-01/``) are searched like any other directory: their keys are not columns.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming_core.reading.format_options import PAGE_CHECKSUMS_ENV, check_page_checksums
from streaming_core.tools.convert.base import Progress, Source, list_files

__all__ = ['ParquetSource', 'RowPart', 'arrow_encoding']


@dataclass(frozen=True)
class RowPart:
    """Rows ``[start, end)`` of the source's concatenated files."""

    start: int
    end: int


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as err:
        raise ImportError('Converting Parquet needs pyarrow: pip install "streaming-core[convert]"') from err
    return pyarrow


def _written_as(field: Any) -> str:
    """What a column of this Arrow field is written as (its encoding; its type where it has none): files whose types
    differ but are written alike (``string`` and ``large_string``, a dictionary of strings) convert together."""
    try:
        return arrow_encoding(field.type, field.name)
    except (TypeError, ValueError):
        return str(field.type)


def arrow_encoding(dtype: Any, column: str) -> str:
    """The MDS encoding of an Arrow type (see the module docstring).

    Raises:
        ValueError: a type with no encoding (durations, intervals, ...), naming the column.
    """
    pa = _pyarrow()
    types = pa.types
    if types.is_dictionary(dtype):
        return arrow_encoding(dtype.value_type, column)
    if types.is_boolean(dtype) or types.is_null(dtype) or types.is_struct(dtype) or types.is_map(dtype):
        return 'json'
    if types.is_integer(dtype) or types.is_floating(dtype):
        return str(np.dtype(dtype.to_pandas_dtype()))
    if types.is_string(dtype) or types.is_large_string(dtype) or getattr(types, 'is_string_view', bool)(dtype):
        return 'str'
    if types.is_binary(dtype) or types.is_large_binary(dtype) or types.is_fixed_size_binary(dtype):
        return 'bytes'
    if types.is_decimal(dtype):
        return 'str_decimal'
    if types.is_temporal(dtype) and not types.is_duration(dtype) and not getattr(types, 'is_interval', bool)(dtype):
        return 'str'
    if types.is_list(dtype) or types.is_large_list(dtype) or types.is_fixed_size_list(dtype):
        inner = dtype.value_type
        while types.is_list(inner) or types.is_large_list(inner) or types.is_fixed_size_list(inner):
            inner = inner.value_type
        if (types.is_integer(inner) or types.is_floating(inner)) and not types.is_boolean(inner):
            return f'ndarray:{np.dtype(inner.to_pandas_dtype())}'
        return 'json'
    raise ValueError(f'Parquet column {column!r} has the Arrow type {dtype}, which has no MDS encoding. Leave it out '
                     f'or give it an encoding with --columns (and a type the encoding accepts).')


class ParquetSource(Source):
    """Parquet input: a ``.parquet`` file, a directory of them (recursive, sorted by path) or a glob.

    Args:
        src: Where the files are.
    """

    kind = 'parquet'
    unit = 'rows'

    def __init__(self, src: str) -> None:
        pa = _pyarrow()
        self.src = src
        self.files = list_files(src, ('.parquet', '.pq'), 'Parquet')
        self.names: list[str] | None = None
        self.row_groups: list[list[int]] = []
        schema = None
        for path in self.files:
            meta = pa.parquet.ParquetFile(path).metadata
            self.row_groups.append([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
            file_schema = meta.schema.to_arrow_schema()
            if schema is None:
                schema = file_schema
            elif file_schema.names != schema.names:
                raise ValueError(f'{path} has the columns {file_schema.names} but {self.files[0]} has '
                                 f'{schema.names}; every Parquet file of a conversion needs the same columns.')
            else:
                for first, other in zip(schema, file_schema):
                    if first.type != other.type and _written_as(first) != _written_as(other):
                        raise ValueError(f'Schema drift: column {other.name!r} is {other.type} in {path} but '
                                         f'{first.type} in {self.files[0]}; every Parquet file of a conversion '
                                         f'needs the same column types. Rewrite that file with the same types, or '
                                         f'convert the files separately.')
        self.schema = schema
        self.total = sum(sum(groups) for groups in self.row_groups)

    def infer_columns(self) -> dict[str, str]:
        """One encoding per column, from the Arrow schema."""
        if not self.total:
            raise ValueError(f'{self.src} holds no rows; there is nothing to convert.')
        return {field.name: arrow_encoding(field.type, field.name) for field in self.schema}

    def configure(self, columns: Mapping[str, str]) -> None:
        """Read only the columns that are written."""
        names = list(columns)
        missing = [name for name in names if name not in self.schema.names]
        if missing:
            raise ValueError(f'Parquet source {self.src} has no column {missing[0]!r} (its columns: '
                             f'{", ".join(self.schema.names)}).')
        self.names = list(names)

    def split(self, parts: int) -> list[RowPart]:
        """Equal row ranges."""
        return [RowPart(self.total * i // parts, self.total * (i + 1) // parts) for i in range(parts)]

    def read(self, part: RowPart, progress: Progress) -> Iterator[dict[str, Any]]:
        """Yield the rows of the range as dicts, one row group in memory at a time."""
        pa = _pyarrow()
        base = 0
        for path, groups in zip(self.files, self.row_groups):
            size = sum(groups)
            if base + size <= part.start or base >= part.end:
                base += size
                continue
            handle = pa.parquet.ParquetFile(path, page_checksum_verification=check_page_checksums())
            for g, rows in enumerate(groups):
                lo, hi = max(part.start - base, 0), min(part.end - base, rows)
                if lo < hi:
                    try:
                        table = handle.read_row_group(g, columns=self.names)
                    except (pa.ArrowException, OSError) as err:
                        hint = (f' (if its writer wrote wrong page checksums, {PAGE_CHECKSUMS_ENV}=0 skips the check)'
                                if 'CRC' in str(err) else '')
                        raise ValueError(f'{path}: row group {g} cannot be read ({type(err).__name__}: {err}); the '
                                         f'file is corrupt{hint}.') from None
                    for batch in table.slice(lo, hi - lo).to_batches(max_chunksize=4096):
                        yield from batch.to_pylist()
                        progress(batch.num_rows)
                base += rows

    def locate(self, part: RowPart, index: int) -> str:
        """The file and row (counted from 0 in that file) of record ``index`` of a part."""
        row = part.start + index
        for path, groups in zip(self.files, self.row_groups):
            size = sum(groups)
            if row < size:
                return f'{path} row {row}'
            row -= size
        return super().locate(part, index)

    def describe(self, part: RowPart) -> str:
        """The row range."""
        return f'rows {part.start}-{part.end} of {os.path.basename(self.src.rstrip("/")) or self.src}'
