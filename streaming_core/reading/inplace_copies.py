"""Decompressed copies beside compressed files in a directory read in place (no remote copy).

Readers write ``shard.mds`` next to ``shard.mds.zstd`` (``chunk.bin`` next to litdata's ``chunk.zstd.bin``) and read
the copy from then on. When the compressed file is replaced (a new version written or synced over the old one, a
symbolic link switched to another version), the copy is stale. So each copy is recorded when it is written, with
the identity (inode, size, modification and change times) of the compressed file it was decompressed from, as
that file was *before* decompression began: a copy is read only while its compressed file is still that file (a
copy damaged since is found by the size and hash checks of :mod:`~streaming_core.reading.shard_manager`).
Timestamps alone cannot tell: a job decompressing the old file while a sync renames the new one into place makes a
copy newer than the new file, and a ``chmod -R`` after a sync gives every old copy a newer change time.

A copy without a record (made by another tool or an earlier version, or its record lost with the cache root) is
decompressed again, once; where the directory cannot be written, it is compared byte for byte with what its
compressed file decompresses to instead (:func:`vouch_for`), and recorded when equal. A copy whose compressed file
is gone is all there is (litdata's own reader leaves chunks so), and is read.

The records of a directory are one append-only log in its state directory (under the cache root, never in the
dataset's directory), one JSON line per copy written; the last line of a name wins, and a torn line is ignored.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from typing import Any, Sequence

from streaming_core.common.fork_safe import ForkSafeLock
from streaming_core.common.paths import state_dir

__all__ = ['RECORD_NAME', 'copy_is_current', 'copies_current', 'decompress_beside', 'note_copy', 'vouch_for']

#: The log of the decompressed copies of a directory read in place, in its state directory.
RECORD_NAME = 'inplace-copies.log'
#: ``log path -> (its inode, bytes read, {copy name: its compressed file's identity})``.
_records: dict[str, tuple[int | None, int, dict[str, list[int]]]] = {}
_lock = ForkSafeLock()  # held while a prefetch thread reads the log: never inherited held by a forked worker


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _log(local_dir: str, create: bool = False) -> str:
    return os.path.join(state_dir(local_dir, create=create), RECORD_NAME)


def _table(path: str) -> dict[str, list[int]]:
    """The records of the log at ``path``, reading only what was appended since the last call (a log of many
    copies is never parsed whole again while a first epoch appends to it)."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    with _lock:
        inode, done, table = _records.get(path, (None, 0, {}))
        if inode == info.st_ino and done == info.st_size:
            return table
        if inode != info.st_ino or done > info.st_size:  # another log (the cache root wiped meanwhile)
            done, table = 0, {}
        try:
            with open(path, 'rb') as handle:
                handle.seek(done)
                data = handle.read(info.st_size - done)
        except OSError:
            return table
        complete = data.rfind(b'\n') + 1  # a line still being appended is read next time
        table = dict(table)
        for line in data[:complete].splitlines():
            try:
                name, zipped = json.loads(line)
            except (ValueError, TypeError):
                continue  # torn by a writer killed mid-line, or not ours
            if isinstance(name, str) and isinstance(zipped, list):
                table[name] = zipped
        _records[path] = (info.st_ino, done + complete, table)
        return table


def copy_is_current(local_dir: str, name: str, raw_path: str, zip_path: str) -> bool:
    """Whether the copy ``raw_path`` (named ``name`` in ``local_dir``) may be read: it exists, and its compressed file
    ``zip_path`` is gone or is still the file the copy was recorded as decompressed from."""
    if not os.path.isfile(raw_path):
        return False
    try:
        zipped = os.stat(zip_path)
    except FileNotFoundError:
        return True
    return _table(_log(local_dir)).get(name) == _identity(zipped)


def copies_current(stream: Any, reader: Any, paths: Sequence[str]) -> bool:
    """Whether every present raw file (``paths``, one per part of ``reader``) of a shard of ``stream`` may be read:
    always for a stream with a remote copy (its local files are checked against the index when it changes, by
    :mod:`streaming_core.reading.index_sync`); in place, each decompressed copy must be current."""
    if not getattr(reader, 'compression', None) or stream.has_remote_copy:
        return True
    for (raw, zipped), path in zip(reader.parts, paths):
        if zipped is not None and not copy_is_current(
                stream.local_dir, raw.basename, path, os.path.join(stream.local_dir, *zipped.basename.split('/'))):
            return False
    return True


def zip_identity(zip_path: str) -> os.stat_result:
    """The compressed file's stat, taken before it is decompressed (what :func:`note_copy` records)."""
    return os.stat(zip_path)


def note_copy(local_dir: str, name: str, before: os.stat_result, raw_path: str) -> None:
    """Record the copy ``raw_path`` (named ``name``) as decompressed from the compressed file whose stat was
    ``before`` when decompression began. A cache root that cannot be written keeps no record (the copy is then
    decompressed again by the next process)."""
    line = json.dumps([name, _identity(before)]) + '\n'
    try:
        fd = os.open(_log(local_dir, create=True), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, line.encode('utf-8', 'surrogateescape'))  # one write: appends of other processes never split it
    finally:
        os.close(fd)


def decompress_beside(stream: Any, reader: Any, raw: Any, zipped: Any, raw_path: str, zip_path: str) -> None:
    """Decompress ``zip_path`` into its copy ``raw_path`` in a directory read in place (through the stream's
    overridable ``_decompress_shard_part``) and record it. Where the directory cannot be written and a copy is
    there, the copy is compared with the decompressed data instead (:func:`vouch_for`).

    Raises:
        ShardCorruptError: that copy differs from what its compressed file decompresses to.
    """
    before = zip_identity(zip_path)
    try:
        stream._decompress_shard_part(zipped, zip_path, raw_path, reader.compression)
    except OSError as err:
        if not isinstance(err, (PermissionError,)) and err.errno != errno.EROFS or not os.path.isfile(raw_path):
            raise
        if vouch_for(stream.local_dir, raw.basename, raw_path, zip_path,
                     lambda target: stream._decompress(reader.compression, zip_path, target, raw)):
            return
        from streaming_core.errors import ShardCorruptError
        raise ShardCorruptError(
            f'{raw_path} is not what {zip_path} decompresses to (a copy of an earlier version of the file?), and it '
            f'cannot be replaced ({type(err).__name__}: {err}). Remove the copy, or read the dataset from a directory '
            f'this job can write (remote=<this directory>, local=<another>).') from err
    if os.path.isfile(raw_path):
        note_copy(stream.local_dir, raw.basename, before, raw_path)


def vouch_for(local_dir: str, name: str, raw_path: str, zip_path: str, decompress: Any) -> bool:
    """For a directory that cannot be written: whether the copy ``raw_path`` holds exactly what ``zip_path``
    decompresses to (``decompress(target)`` writes that into ``target``, a scratch file in the state directory);
    recorded when it does."""
    before = zip_identity(zip_path)
    scratch = os.path.join(state_dir(local_dir), f'vouch-{os.getpid()}-{threading.get_ident()}')
    try:
        decompress(scratch)
        from streaming_core.reading.listing_entries import same_bytes
        if not same_bytes(raw_path, scratch):
            return False
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
    note_copy(local_dir, name, before, raw_path)
    return True
