"""``streaming.base.format``: the shard writers and readers of the MDS, JSON and XSV formats.

The writers are streaming-core's format plugins' own (``streaming_mds.MDSWriter`` ...), with the reference's
keyword-only arguments and byte-identical output. ``reader_from_json(dirname, split, obj)`` builds a
:class:`Reader` over the format plugin's reader for one shard entry of an ``index.json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from streaming_core.reading.index_file import FileInfo, get_index_basename, resolve_inside, shard_readers
from streaming_csv import CSVWriter, TSVWriter, XSVWriter
from streaming_jsonl import JSONWriter
from streaming_mds import MDSWriter

__all__ = ['CSVWriter', 'FileInfo', 'get_index_basename', 'JSONWriter', 'MDSWriter', 'Reader', 'reader_from_json',
           'TSVWriter', 'XSVWriter']


class Reader:
    """One shard of a local dataset directory: its index entry and random access to its samples.

    Args:
        dirname: The dataset directory.
        split: The split subdirectory, or None.
        shard: The format plugin's reader of the shard entry.
        entry: The shard entry itself (for :meth:`validate`).
    """

    def __init__(self, dirname: str, split: str | None, shard: Any, entry: Mapping[str, Any] | None = None) -> None:
        self.dirname = dirname
        self.entry = dict(entry) if entry is not None else None
        self.split = split or ''
        self.shard = shard
        self.samples: int = shard.samples
        self.compression: str | None = shard.compression
        self.hashes: list[str] = shard.hashes
        self.size_limit = shard.size_limit

    @property
    def format(self) -> str:
        """The shard format name (``'mds'``, ``'json'``, ``'csv'``...)."""
        return self.shard.format_name

    @property
    def file_pairs(self) -> list[tuple[FileInfo, FileInfo | None]]:
        """``(raw, zip)`` file infos of each part (data, and meta for split formats)."""
        return list(self.shard.parts)

    def get_raw_size(self) -> int:
        """Bytes of the uncompressed files."""
        return self.shard.raw_bytes

    def get_zip_size(self) -> int | None:
        """Bytes of the compressed files, or None when uncompressed."""
        return self.shard.zip_bytes if self.compression else None

    def get_max_size(self) -> int:
        """Bytes of raw plus compressed files."""
        return self.shard.max_size

    def get_persistent_size(self, keep_zip: bool) -> int:
        """Bytes the shard keeps on disk once prepared: raw, plus compressed when ``keep_zip``."""
        return self.shard.max_size if keep_zip and self.compression else self.shard.raw_bytes

    @property
    def raw_data(self) -> FileInfo:
        """The raw data file."""
        return self.shard.parts[0][0]

    @property
    def zip_data(self) -> FileInfo | None:
        """The compressed data file, or None."""
        return self.shard.parts[0][1]

    @property
    def raw_meta(self) -> FileInfo | None:
        """The raw meta file of a split format (JSON, CSV...), or None."""
        return self.shard.parts[1][0] if len(self.shard.parts) > 1 else None

    @property
    def zip_meta(self) -> FileInfo | None:
        """The compressed meta file of a split format, or None."""
        return self.shard.parts[1][1] if len(self.shard.parts) > 1 else None

    def validate(self, allow_unsafe_types: bool) -> None:
        """Raise ``ValueError`` when the shard has a column that can run code on read (``pkl``) and
        ``allow_unsafe_types`` is false (the format plugin's own check)."""
        if self.entry is not None and not allow_unsafe_types:
            shard_readers({'shards': [self.entry]}, self.shard.where, allow_unsafe_types=False)

    def _open(self) -> Any:
        root = os.path.join(self.dirname, self.split)
        paths = [resolve_inside(root, raw.basename, self.shard.where) for raw, _ in self.shard.parts]
        return self.shard.open(paths)

    def get_item(self, idx: int) -> dict[str, Any]:
        """Sample ``idx`` of this shard, decoded (the raw files must be present; opened for this read only, so no
        file stays open or mapped after it is evicted or replaced)."""
        if not 0 <= idx < self.samples:
            raise IndexError(f'Sample index {idx} out of range for a shard of {self.samples} samples.')
        view = self._open()
        try:
            return view[idx]
        finally:
            view.close()

    def __getitem__(self, idx: int) -> dict[str, Any]:
        return self.get_item(idx)

    def __len__(self) -> int:
        return self.samples

    def __iter__(self) -> Iterator[dict[str, Any]]:
        view = self._open()  # once for the whole shard
        try:
            for idx in range(self.samples):
                yield view[idx]
        finally:
            view.close()


def reader_from_json(dirname: str, split: str | None, obj: Mapping[str, Any]) -> Reader:
    """A :class:`Reader` for one shard entry ``obj`` of the index in ``dirname/split``."""
    where = os.path.join(dirname, split or '', get_index_basename())
    shard = shard_readers({'shards': [obj]}, where, allow_unsafe_types=True)[0]
    return Reader(dirname, split, shard, obj)
