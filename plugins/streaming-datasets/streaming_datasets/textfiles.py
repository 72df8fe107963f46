"""Reading JSON-lines text corpora: plain, gzip, bzip2, xz or zstd files, line by line, with clear errors.

Used by the C4, Pile and Wikipedia recipes and by the token converters. Compression is chosen by the file name's
suffix (``.gz``, ``.bz2``, ``.xz``, ``.zst``/``.zstd``); zstd needs the ``zstandard`` package.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, Any

from streaming_datasets.conversion import SourceLayoutError

__all__ = ['open_text', 'iter_json_lines', 'find_files', 'text_field', 'JSONL_PATTERN']

#: File names read as JSON lines when a folder is searched (WikiExtractor's ``wiki_00`` files included).
JSONL_PATTERN = re.compile(r'(^wiki_\d+$)|(\.(jsonl|json|ndjson)(\.(gz|bz2|xz|zst|zstd))?$)')


def open_text(path: str) -> IO[str]:
    """Open a text file for reading as UTF-8, decompressing by suffix."""
    lower = path.lower()
    if lower.endswith('.gz'):
        return gzip.open(path, 'rt', encoding='utf-8')
    if lower.endswith('.bz2'):
        return bz2.open(path, 'rt', encoding='utf-8')
    if lower.endswith('.xz'):
        return lzma.open(path, 'rt', encoding='utf-8')
    if lower.endswith(('.zst', '.zstd')):
        try:
            import zstandard
        except ImportError:
            raise ImportError(f'Reading {path} needs the zstandard package: pip install zstandard (or '
                              f'streaming-datasets[pile]).') from None
        raw = open(path, 'rb')  # noqa: SIM115 - closed with the wrapper
        reader = zstandard.ZstdDecompressor(max_window_size=1 << 31).stream_reader(raw, closefd=True)
        return io.TextIOWrapper(reader, encoding='utf-8')
    return open(path, encoding='utf-8')


def iter_json_lines(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every non-blank line of a JSON-lines file; each line must be an object."""
    if not os.path.isfile(path):
        raise SourceLayoutError(f'{path} does not exist or is not a file.')
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise SourceLayoutError(f'{path}:{number}: not a JSON line ({err}).') from None
                if not isinstance(record, dict):
                    raise SourceLayoutError(f'{path}:{number}: expected a JSON object per line, got '
                                            f'{type(record).__name__}.')
                yield number, record
    except SourceLayoutError:
        raise
    except (EOFError, OSError, UnicodeDecodeError) as err:
        raise SourceLayoutError(f'{path}: cannot read it as (compressed) UTF-8 JSON lines: {err}') from err
    except Exception as err:  # zstandard.ZstdError (a corrupt .zst file)
        if type(err).__name__ != 'ZstdError':
            raise
        raise SourceLayoutError(f'{path}: cannot decompress it: {err}') from err


def text_field(record: Mapping[str, Any], key: str, path: str, line: int, *, cast: Callable[[Any], str] | None = None,
               nested: Sequence[str] = ()) -> str:
    """``record[*nested][key]`` as a string; a missing field or a non-string value is a :class:`SourceLayoutError`.

    Args:
        record: The JSON object.
        key: The field.
        path: The file (for messages).
        line: The line number (for messages).
        cast: Convert a non-string value (e.g. ``str`` for numeric ids); without it the value must be a string.
        nested: Keys of the enclosing objects (``('meta',)`` for ``meta.pile_set_name``).
    """
    value: Any = record
    for part in (*nested, key):
        if not isinstance(value, Mapping) or part not in value:
            where = '.'.join((*nested, key))
            raise SourceLayoutError(f'{path}:{line}: the record has no "{where}" field (keys: {sorted(record)}).')
        value = value[part]
    if isinstance(value, str):
        return value
    if cast is not None and value is not None:
        return cast(value)
    raise SourceLayoutError(f'{path}:{line}: "{key}" must be a string, got {type(value).__name__}.')


def find_files(root: str, pattern: re.Pattern[str] = JSONL_PATTERN) -> list[str]:
    """Files under ``root`` (recursively) whose name matches ``pattern``, sorted by relative path; a file is returned
    as itself."""
    if os.path.isfile(root):
        return [root]
    if not os.path.isdir(root):
        raise SourceLayoutError(f'{root} does not exist.')
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
        found.extend(os.path.join(dirpath, name) for name in filenames if pattern.search(name))
    return sorted(found, key=lambda p: os.path.relpath(p, root).split(os.sep))
