"""Decompressed copies beside compressed files in a directory read in place (no remote copy).

Readers write ``shard.mds`` next to ``shard.mds.zstd`` (a ``.tar`` next to a ``.tar.gz``, ``chunk.bin`` next to
``chunk.zstd.bin``) and read the copy from then on. When the compressed file is rewritten (a new version of the
dataset written or synced over the old one), the copy is stale: it is current only while the compressed file has
changed neither its data (modification time) nor its inode (change time: a rename over it, ``rsync``, ``cp -p``)
since the copy was written. A stale copy is decompressed again; a copy without its compressed file (litdata's own
reader leaves chunks so) is all there is, and is read.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

__all__ = ['copy_is_current', 'copies_current']


def copy_is_current(raw_path: str, zip_path: str) -> bool:
    """Whether the decompressed copy ``raw_path`` is at least as recent as the compressed file ``zip_path`` it was
    made from (False when the copy is absent; True when only the copy is there)."""
    try:
        raw = os.stat(raw_path)
    except FileNotFoundError:
        return False
    try:
        zipped = os.stat(zip_path)
    except FileNotFoundError:
        return True
    return zipped.st_mtime_ns <= raw.st_mtime_ns and zipped.st_ctime_ns <= raw.st_ctime_ns


def copies_current(stream: Any, reader: Any, paths: Sequence[str]) -> bool:
    """Whether every present raw file (``paths``, one per part of ``reader``) of a shard of ``stream`` can be read:
    always for a stream with a remote copy (its local files are checked against the index when it changes, by
    :mod:`streaming_core.reading.index_sync`); in place, the decompressed copies must be current."""
    if not getattr(reader, 'compression', None) or stream.has_remote_copy:
        return True
    for (_, zipped), path in zip(reader.parts, paths):
        if zipped is not None and not copy_is_current(path, os.path.join(stream.local_dir,
                                                                          *zipped.basename.split('/'))):
            return False
    return True
