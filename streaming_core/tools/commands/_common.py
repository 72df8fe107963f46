"""Helpers shared by the ``streaming`` subcommands: storage options, locating a dataset's index, formatting."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streaming_core.errors import RemoteNotFoundError
from streaming_core.reading.index_file import INDEX_BASENAME, parse_index_text
from streaming_core.storage.facade import download_file, is_remote, join, local_path
from streaming_core.storage.redact import redact_url

__all__ = ['add_storage_option', 'storage_options', 'DatasetIndex', 'index_root', 'locate_index_file', 'open_index',
           'open_located_index', 'add_format_option', 'human_bytes', 'entry_columns', 'comma_list', 'first_line']


def add_storage_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--storage-option KEY=VALUE`` (repeatable) for remote datasets."""
    parser.add_argument('--storage-option', metavar='KEY=VALUE', action='append', default=[],
                        help='an option for the remote\'s storage backend (endpoint_url, profile, ...); repeat for '
                             'several. Values are read as JSON when they parse (true, 3), else as text.')


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--storage-option`` values as a dict.

    Raises:
        ValueError: an item without ``=``.
    """
    options: dict[str, Any] = {}
    for item in getattr(args, 'storage_option', None) or []:
        key, sep, value = item.partition('=')
        if not sep or not key.strip():
            raise ValueError(f'--storage-option {item!r}: expected KEY=VALUE, for example endpoint_url=http://...')
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


@dataclass
class DatasetIndex:
    """A dataset's parsed index and where its files are.

    Attributes:
        index: The parsed ``index.json``.
        location: The index's path or URL (for messages).
        root: The directory or URL the shard file names are relative to.
        remote: Whether ``root`` is a remote URL.
        index_bytes: The size of ``index.json``.
    """

    index: dict[str, Any]
    location: str
    root: str
    remote: bool
    index_bytes: int


def index_root(dataset: str, split: str | None) -> str:
    """The directory or URL of a dataset given as a directory, an ``index.json`` path, or a URL of either (plus
    ``split``)."""
    root = dataset.rstrip('/')
    if root.endswith('/' + INDEX_BASENAME) or root == INDEX_BASENAME:
        root = root[:-len(INDEX_BASENAME)].rstrip('/') or '.'
    return join(root, split) if split else root


def locate_index_file(dataset: str, split: str | None, options: dict[str, Any], scratch: str,
                      timeout: float = 60.0) -> tuple[str, str, str, bool] | None:
    """``(local path, location, root, remote)`` of the dataset's ``index.json`` (a remote one downloaded into
    ``scratch``; ``root`` is the directory or URL its shard names are relative to), or ``None`` when there is none
    (:func:`open_located_index` then decides: an index derived from the files, or its error)."""
    root = index_root(dataset, split)
    if is_remote(root):
        url = join(root, INDEX_BASENAME)
        path = os.path.join(scratch, INDEX_BASENAME)
        try:
            download_file(url, path, timeout=timeout, options=options)
        except RemoteNotFoundError:
            return None
        return path, redact_url(url), root, True  # the location is for messages
    root = local_path(root)
    path = os.path.join(root, INDEX_BASENAME)
    return (path, path, root, False) if os.path.isfile(path) else None


def open_index(dataset: str, split: str | None, options: dict[str, Any], scratch: str,
               timeout: float = 60.0) -> DatasetIndex:
    """Read the index of a dataset given as a directory, an ``index.json`` path, or a remote URL of either.

    Remote indexes are downloaded into ``scratch``.

    Raises:
        FileNotFoundError: no index at the local path.
        IndexFormatError: the index is not valid.
        StorageError: the remote index cannot be downloaded.
    """
    located = locate_index_file(dataset, split, options, scratch, timeout)
    return open_located_index(located, dataset, split, options, timeout)


def open_located_index(located: tuple[str, str, str, bool] | None, dataset: str, split: str | None,
                       options: dict[str, Any], timeout: float = 60.0, fmt: str | None = None) -> DatasetIndex:
    """:func:`open_index` for what :func:`locate_index_file` found (nothing is downloaded again). ``fmt``: the
    format of a directory that indexes itself (``None``: detected from its files)."""
    if located is None:
        root = index_root(dataset, split)
        if is_remote(root):
            return _derived(root, True, timeout, options, fmt)
        root = local_path(root)
        if os.path.isdir(root):
            return _derived(root, False, timeout, options, fmt)
        raise FileNotFoundError(f'No dataset at {root}: {os.path.join(root, INDEX_BASENAME)} does not exist. Give a '
                                f'dataset directory, its index.json, or a remote URL (add --split for a split '
                                f'subdirectory).')
    path, location, root, remote = located
    with open(path, 'rb') as handle:
        text = handle.read()
    from streaming_core.reading.foreign_index import build_foreign_index, foreign_index
    foreign = foreign_index(text)
    if foreign is not None:  # another library's index.json (litdata's): the index its builder derives from it
        return DatasetIndex(build_foreign_index(root, text, foreign, timeout=timeout, options=options), location,
                            root, remote, len(text))
    return DatasetIndex(parse_index_text(text, location), location, root, remote, len(text))


def _derived(root: str, remote: bool, timeout: float, options: dict[str, Any],
             fmt: str | None = None) -> DatasetIndex:
    """The index a format that indexes itself derives from the files of ``root`` (no ``index.json`` there)."""
    from streaming_core.reading.derived_index import build_index
    return DatasetIndex(build_index(root, fmt=fmt, timeout=timeout, options=options), root, root, remote, 0)


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--format NAME``: the format of a directory without ``index.json`` that holds several."""
    parser.add_argument('--format', default=None, metavar='NAME',
                        help='the format of a directory without index.json whose files are of several formats '
                             '(parquet, webdataset...): the one to read')


def human_bytes(count: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    value = float(count)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if abs(value) < 1024 or unit == 'TiB':
            return f'{int(value)} B' if unit == 'B' else f'{value:.1f} {unit}'
        value /= 1024
    return f'{value:.1f} TiB'


def entry_columns(entry: dict[str, Any]) -> dict[str, str]:
    """The columns and encodings of a shard entry of any built-in format (MDS lists, JSON/CSV ``columns``)."""
    names = entry.get('column_names')
    encodings = entry.get('column_encodings')
    if isinstance(names, list) and isinstance(encodings, list):
        return {str(n): str(e) for n, e in zip(names, encodings)}
    columns = entry.get('columns')
    if isinstance(columns, dict):
        return {str(k): str(v) for k, v in columns.items()}
    if isinstance(columns, list):  # [[name, type], ...] keeps the column order (Parquet)
        return {str(name): str(kind) for name, kind in columns}
    return {}


def comma_list(text: str | None) -> list[str]:
    """``'a, b'`` -> ``['a', 'b']``."""
    return [item.strip() for item in (text or '').split(',') if item.strip()]


def first_line(items: Sequence[str]) -> str:
    """Join items for a one-line listing."""
    return ', '.join(items) if items else '-'
