"""Which units of a stream's index name the same file: grouping the units of one file, and refusing duplicates.

Formats whose units share files (a Parquet file's row groups) list the units of one file next to each other; other
formats never name one file twice. Both are checked on the mapped arrays of a :class:`ShardTable`, vectorised: only
units whose names may be equal (the same length and size next to each other, or the same hash) are compared.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import IndexFormatError
from streaming_core.machinery.protocols import ShardReader
from streaming_core.reading.shard_table import ShardTable

__all__ = ['table_shares_files', 'readers_share_files', 'first_names', 'same_file_as_previous', 'file_runs',
           'name_hashes', 'same_name_candidates', 'check_distinct_files']


def table_shares_files(table: ShardTable) -> bool:
    """Whether a format of the table declares that several of its units may name one file."""
    from streaming_core.machinery.lookup import get_registry
    formats = get_registry('format')
    names = {template['entry'].get('format') for template in table.header['templates']}
    return any(getattr(formats.get(name), 'units_share_files', False) for name in names if isinstance(name, str))


def readers_share_files(readers: Sequence[ShardReader]) -> bool:
    """Whether the format of some reader in a list (a stream's own ``get_shards``) declares that several of its
    units may name one file; readers of other formats are never grouped, whatever their file names."""
    from streaming_core.machinery.lookup import get_registry
    formats = get_registry('format')
    names = {getattr(reader, 'format_name', None) for reader in readers}
    found = []
    for name in names:
        if isinstance(name, str):
            try:
                found.append(getattr(formats.get(name), 'units_share_files', False))
            except Exception:  # noqa: BLE001 - a custom reader's format may not be registered: it shares nothing
                found.append(False)
    return any(found)


def first_names(table: ShardTable, units: NDArray[np.int64] | slice) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Where the first file name of each of ``units`` (positions, or a slice of them) lies in the mapped string blob:
    ``(starts, lengths)``."""
    arrays = table.arrays
    names = arrays['file_name'][arrays['file_start'][units]]
    starts = arrays['str_off'][names]
    return starts, arrays['str_off'][names + 1] - starts


def _spans(lengths: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For spans of ``lengths`` bytes laid end to end: each span's first position, and each byte's offset in its
    span (to gather names from the blob at once)."""
    firsts = np.cumsum(lengths) - lengths
    return firsts, np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(firsts, lengths)


def same_file_as_previous(table: ShardTable) -> NDArray[np.bool_]:
    """Per unit of a table, whether its first file has the same name as the previous unit's (vectorised over the
    mapped arrays: only neighbours of equal name length and file size have their names compared)."""
    arrays = table.arrays
    count = len(table)
    same = np.zeros(count, dtype=bool)
    if count < 2:
        return same
    starts, lengths = first_names(table, slice(0, count))
    sizes = arrays['file_bytes'][arrays['file_start'][:count]]
    candidates = np.flatnonzero((lengths[1:] == lengths[:-1]) & (sizes[1:] == sizes[:-1]) & (lengths[1:] > 0)) + 1
    if candidates.size:
        spans = lengths[candidates]
        firsts, within = _spans(spans)
        blob = arrays['str_blob']
        differ = blob[np.repeat(starts[candidates - 1], spans) + within] != blob[np.repeat(starts[candidates],
                                                                                            spans) + within]
        same[candidates[~np.logical_or.reduceat(differ, firsts)]] = True
    return same


def file_runs(same: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Per unit, the first unit of its run of units naming the same file (``same``: as the previous unit)."""
    positions = np.arange(same.size, dtype=np.int64)
    return np.maximum.accumulate(np.where(same, 0, positions)) if same.size else positions


def name_hashes(table: ShardTable, units: NDArray[np.int64], chunk: int = 1 << 16) -> NDArray[np.uint64]:
    """A 64-bit hash of the first file name of each of ``units`` (none empty), vectorised over the mapped string
    table ``chunk`` units at a time (memory stays bounded: about 40 bytes per name byte of one chunk)."""
    out = np.empty(units.size, dtype=np.uint64)
    for lo in range(0, units.size, chunk):
        starts, lengths = first_names(table, units[lo:lo + chunk])
        firsts, within = _spans(lengths)
        data = table.arrays['str_blob'][np.repeat(starts, lengths) + within].astype(np.uint64)
        powers = np.cumprod(np.full(int(lengths.max()), 1099511628211, dtype=np.uint64))  # wraps modulo 2**64
        with np.errstate(over='ignore'):
            out[lo:lo + chunk] = np.add.reduceat(data * powers[within], firsts) ^ lengths.astype(np.uint64)
    return out


def same_name_candidates(table: ShardTable, units: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ``units`` (ascending) whose first file's name may equal another's of ``units``: only units whose name
    hash (:func:`name_hashes`) repeats can share a name (their names are then compared one by one)."""
    units = units[first_names(table, units)[1] > 0]  # an empty name is refused elsewhere
    if units.size < 2:
        return units[:0]
    hashes = name_hashes(table, units)
    order = np.argsort(hashes, kind='stable')
    ordered = hashes[order]
    repeated = np.zeros(units.size, dtype=bool)
    equal = ordered[1:] == ordered[:-1]
    repeated[order[1:][equal]] = True
    repeated[order[:-1][equal]] = True
    return units[repeated]


def check_distinct_files(table: ShardTable) -> None:
    """Refuse an index (just converted to its binary form, under the build lock: once per version and node) that names
    one file in two units of a format whose units never share files: its samples would be read twice. The binary
    form is removed, so no later process trusts it.

    Raises:
        IndexFormatError: naming the index, both units and the file.
    """
    if len(table) < 2 or table_shares_files(table):
        return
    seen: dict[str, int] = {}
    for unit in same_name_candidates(table, np.arange(len(table), dtype=np.int64)).tolist():
        name = table.file_names(unit)[0]
        if name in seen:
            try:
                os.remove(table.path)
            except OSError:
                pass
            raise IndexFormatError(f'{table.source}: shards {seen[name]} and {unit} both name the file {name}; its '
                                   f'samples would be read twice. Fix or rewrite the index.')
        seen[name] = unit
