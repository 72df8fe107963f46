"""A stream's *format options* (``Stream(columns=[...])``, ``format_options={...}``): checking them, and handing
them to the shard formats of a streaming ``index.json``.

Where the options go depends on where the stream's index comes from:

* **A derived index** (a directory of Parquet files, a foreign ``index.json``): the index builder takes them
  (:func:`streaming_core.reading.derived_index.configure_builder`) and they are part of the derived index's identity.
* **A streaming index.json** (MDS, JSON lines, CSV...): the index is the user's file, whatever the options, so its
  identity, its binary form, the epoch plans built on it and the resumption state do not depend on them (a column
  projection changes what a sample holds, not which samples there are or their order). The *shard formats* take
  them instead: a format declares the names it takes in ``option_names`` and returns a configured format from
  ``configure(options)``, whose readers honour them (MDS: decode only the projected columns).
  :class:`ProjectedShardTable` is the stream's shard table with every format so configured. A format that declares
  no options refuses them with a :class:`~streaming_core.reading.derived_index.FormatOptionError` naming the option,
  the directory and the format; so does a value the format refuses, and a column the shards do not have (naming the
  stream, the column and the columns there are), at construction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from streaming_core.errors import FormatOptionError, UnknownColumnError
from streaming_core.reading.shard_table import ShardTable

__all__ = ['FormatOptionError', 'UnknownColumnError', 'merge_format_options', 'configure_format',
           'ProjectedShardTable', 'apply_format_options', 'columns_option', 'checked_projection',
           'PAGE_CHECKSUMS_ENV', 'check_page_checksums']


#: ``0`` skips the check of Parquet page checksums (for files whose writer wrote wrong ones); read by every Parquet
#: reader (the Parquet format, the Parquet converter, the LAION metadata reader).
PAGE_CHECKSUMS_ENV = 'STREAMING_PARQUET_PAGE_CHECKSUMS'


def check_page_checksums() -> bool:
    """Whether Parquet pages written with a checksum are checked when read (unless :data:`PAGE_CHECKSUMS_ENV` is
    ``0``)."""
    return os.environ.get(PAGE_CHECKSUMS_ENV, '1').strip() != '0'


def merge_format_options(format_options: Mapping[str, Any] | None, columns: Sequence[str] | None = None,
                         where: str = 'Stream') -> dict[str, Any]:
    """``format_options`` with ``columns=`` folded in as ``'columns'``, checked: string names, JSON values (they are
    part of the derived index's identity), ``columns`` a non-empty list of distinct names given once.

    Raises:
        TypeError: ``format_options`` is not a mapping of names to JSON values.
        ValueError: ``columns`` is malformed, or given both as ``columns=`` and in ``format_options``.
    """
    if format_options is not None and not isinstance(format_options, Mapping):
        raise TypeError(f"{where}: `format_options` must be a dict such as {{'columns': ['text']}}, got "
                        f'{type(format_options).__name__}.')
    options = dict(format_options or {})
    if columns is not None:
        if 'columns' in options:
            raise ValueError(f'{where}: `columns` is given twice (as columns= and in format_options); give it once.')
        options['columns'] = columns
    value = options.get('columns')
    if value is not None:
        if (isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value
                or not all(isinstance(name, str) and name for name in value) or len(set(value)) != len(value)):
            raise ValueError(f"{where}: `columns` must be a non-empty list of distinct column names such as ['text', "
                             f"'label'], got {value!r}.")
        options['columns'] = list(value)
    for key, item in options.items():
        try:
            json.dumps(item, sort_keys=True)
        except (TypeError, ValueError):
            raise TypeError(f'{where}: format option {key!r} must be JSON data (str, number, bool, None, lists and '
                            f'dicts of them), got {type(item).__name__}.') from None
        if not isinstance(key, str) or not key:
            raise TypeError(f'{where}: format option names must be non-empty strings, got {key!r}.')
    return options


def columns_option(options: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The ``columns`` option of a format's ``configure(options)`` as a tuple, or None when it is absent.

    Raises:
        ValueError: ``columns`` is not a non-empty list of distinct names (the check :func:`merge_format_options`
            makes for streams, repeated for formats configured directly).
    """
    columns = options.get('columns')
    if columns is None:
        return None
    if (isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence) or not columns
            or not all(isinstance(name, str) and name for name in columns) or len(set(columns)) != len(columns)):
        raise ValueError(f'columns must be a non-empty list of distinct column names, got {columns!r}.')
    return tuple(columns)


def checked_projection(columns: Sequence[str], available: Sequence[str], what: str) -> tuple[str, ...]:
    """``columns`` as a tuple, when each is one of ``available`` (the columns of the shard ``what`` describes).

    Raises:
        ValueError: a name is not among ``available``, naming it and the columns there are.
    """
    missing = [name for name in columns if name not in available]
    if missing:
        raise ValueError(f'no column {", ".join(repr(name) for name in missing)} in this {what}; its columns are '
                         f'{list(available)}.')
    return tuple(columns)


def configure_format(name: str, shard_format: Any, options: Mapping[str, Any], where: str) -> Any:
    """The shard format ``shard_format`` (registered as ``name``) configured with a stream's format options.

    A format takes options by declaring ``option_names`` (the names it accepts) and a ``configure(options) ->
    format`` method returning the format whose readers honour them (it checks the values).

    Raises:
        FormatOptionError: an option the format does not take (naming it, the directory ``where``, the format and
            the options it takes), or a value ``configure`` refuses (its message).
    """
    accepted = tuple(getattr(shard_format, 'option_names', ()) or ())
    unknown = [key for key in options if key not in accepted]
    if unknown or not callable(getattr(shard_format, 'configure', None)):
        names = ', '.join(repr(key) for key in (unknown or list(options)))
        takes = (f'whose format takes only {", ".join(repr(key) for key in accepted)}' if accepted
                 else 'whose format takes no options')
        raise FormatOptionError(
            f'format option {names} for {where}: it holds a streaming index.json of {name!r} shards, {takes}. '
            f'Remove it from `columns` / `format_options` for this stream.')
    try:
        return shard_format.configure(dict(options))
    except (TypeError, ValueError) as err:
        raise FormatOptionError(f'format_options={dict(options)!r} for {where} (format {name!r}): {err}') from None


class ProjectedShardTable(ShardTable):
    """A stream's :class:`~streaming_core.reading.shard_table.ShardTable` whose readers are made by its shard
    formats configured with the stream's format options (same arrays, identity and layout as the plain table).

    Every template's first shard is read again through its configured format at construction, so an option its
    entries cannot honour (a column they lack) fails then, naming the stream; the entries of one template share
    their column layout, so the shards read later do too. Pickles as a plain table does (the stream carries the
    options, and :meth:`~streaming_core.reading.stream.Stream.shard_table` configures the unpickled table again).
    """

    @classmethod
    def of(cls, table: ShardTable, options: Mapping[str, Any]) -> ProjectedShardTable:
        """``table`` (already validated by the plain formats) with its formats configured with ``options``.

        Raises:
            FormatOptionError: a format takes no such option, refuses its value, or its shards cannot honour it.
        """
        projected = cls.__new__(cls)
        projected.__dict__.update(table.__dict__)
        projected._configure(dict(options))
        return projected

    def _configure(self, options: dict[str, Any]) -> None:
        stream = self.stream
        local_dir = getattr(stream, 'local_dir', self.source)
        templates = self.header['templates']
        self._formats = [configure_format(str(template['entry'].get('format')), shard_format, options, local_dir)
                         for template, shard_format in zip(templates, self._formats, strict=True)]
        readers: dict[int, Any] = {}
        for shard in sorted(self._readers):  # the templates' first shards, which the plain formats accepted
            try:
                readers[shard] = self._make_reader(shard)
            except (TypeError, ValueError, LookupError) as err:  # the entry is valid: the options are not
                name = self.entry(shard).get('format')
                raise FormatOptionError(
                    f'{stream!r}: format option {_describe(options)} cannot be read from {self.source} shard '
                    f'{shard} (format {name!r}): {err}') from None
        self._readers = readers


def _describe(options: Mapping[str, Any]) -> str:
    return ', '.join(f'{key}={value!r}' for key, value in options.items())


def apply_format_options(stream: Any, table: ShardTable) -> ShardTable:
    """``table`` as ``stream`` reads it: projected (:class:`ProjectedShardTable`) when the stream has format options
    and its index is a streaming ``index.json``; as it is otherwise (a derived index took them already).

    Raises:
        FormatOptionError: see :meth:`ProjectedShardTable.of`.
    """
    options = dict(getattr(stream, 'format_options', None) or {})
    if not options or table.identity.startswith('derived:'):
        return table
    return ProjectedShardTable.of(table, options)
