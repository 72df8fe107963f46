"""What every conversion source provides, and the file listing the built-in sources share.

A :class:`Source` describes input data that can be cut into contiguous, independent parts (byte ranges of text
files, row ranges of Parquet files, ranges of an image list). Parts are read in separate processes, each written as
its own partition, and the partitions are merged in order, so the converted dataset has the source's order.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ['Source', 'Progress', 'list_files', 'is_compressed', 'COMPRESSED_SUFFIXES']

#: Called with the number of progress units (bytes, rows or files) consumed since the last call.
Progress = Callable[[int], None]

#: Input file suffixes read through a decompressor (such files cannot be split; each is one piece of work).
COMPRESSED_SUFFIXES = ('.gz', '.bz2', '.xz', '.zst', '.zstd')


class Source:
    """Base class of conversion sources. Instances are pickled to worker processes, so they hold plain data.

    Attributes:
        kind: A short name (``'jsonl'``, ``'csv'``, ...) used in messages.
        unit: The progress unit shown by the bar (``'B'``, ``'rows'``, ``'files'``).
        total: Progress units of the whole source.
        text_values: Values are text to parse (CSV), which matters for ``json`` columns.
    """

    kind: str = ''
    unit: str = 'B'
    total: int = 0
    text_values: bool = False

    def infer_columns(self) -> dict[str, str]:
        """The inferred MDS encoding of every column, in source order (override)."""
        raise NotImplementedError

    def configure(self, columns: Mapping[str, str]) -> None:
        """Learn the final columns and encodings before reading (to skip unused columns, say; default: nothing)."""

    def split(self, parts: int) -> list[Any]:
        """Cut the source into ``parts`` contiguous parts in source order (some may be empty; override)."""
        raise NotImplementedError

    def read(self, part: Any, progress: Progress) -> Iterator[dict[str, Any]]:
        """Yield the records of one part in order, reporting progress units as they are consumed (override)."""
        raise NotImplementedError

    def describe(self, part: Any) -> str:
        """A short description of a part for error messages (override)."""
        return repr(part)

    def input_paths(self) -> list[str]:
        """The local files (or directories) this source reads: an output that ``exist_ok`` would clear must not
        hold them (default: the ``files`` attribute, if any)."""
        return list(getattr(self, 'files', []))

    def locate(self, part: Any, index: int) -> str:
        """Where record ``index`` (counted from 0) of a part is, for error messages (default: the part's
        description and the record's number in it)."""
        return f'{self.describe(part)}: record {index} of this part'


def list_files(src: str, suffixes: Sequence[str], what: str) -> list[str]:
    """The input files of ``src``: the file itself, every matching file under a directory (recursive, sorted by
    relative path, hidden entries skipped), or the sorted matches of a glob pattern.

    Args:
        src: A file, a directory or a glob pattern.
        suffixes: Lowercase file name endings accepted inside a directory (a compressed variant such as
            ``.jsonl.gz`` is accepted too).
        what: The kind of file, for the error message.

    Raises:
        FileNotFoundError: nothing matches.
    """
    if os.path.isfile(src):
        return [src]
    wanted = tuple(s + c for s in suffixes for c in ('', *COMPRESSED_SUFFIXES))
    if os.path.isdir(src):
        found = []
        for root, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
            for name in files:
                if not name.startswith('.') and name.lower().endswith(wanted):
                    found.append(os.path.join(root, name))
        found.sort(key=lambda path: os.path.relpath(path, src).split(os.sep))
        if not found:
            raise FileNotFoundError(f'No {what} files ({", ".join(suffixes)}, optionally compressed) under {src}.')
        return found
    if any(ch in src for ch in '*?['):
        found = sorted(path for path in glob.glob(src, recursive=True) if os.path.isfile(path))
        if not found:
            raise FileNotFoundError(f'No file matches the pattern {src}.')
        return found
    raise FileNotFoundError(f'{what} source {src} does not exist (give a file, a directory or a glob pattern).')


def is_compressed(path: str) -> bool:
    """Whether ``path`` is read through a decompressor (by its suffix)."""
    return path.lower().endswith(COMPRESSED_SUFFIXES)
