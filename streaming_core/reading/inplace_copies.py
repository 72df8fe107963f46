"""Decompressed copies beside compressed files in a directory read in place (no remote copy).

Readers write ``shard.mds`` next to ``shard.mds.zstd`` (``chunk.bin`` next to litdata's ``chunk.zstd.bin``) and read
the copy from then on. When the compressed file is replaced (a new version written or synced over the old one, a
symbolic link switched to another version), or the copy itself is (a mirror of another reader's directory syncing
its copies over ours, another cache root's job renaming its copy into place), the copy may be stale. So each copy
is recorded when it is written: the identity (inode, size, modification and change times) of the compressed file
it was decompressed from, as that file was *before* decompression began, and the copy's own. A copy is read as it
is only while both files are still what the record says. Timestamps alone cannot tell: a job decompressing the old
file while a sync renames the new one into place makes a copy newer than the new file, and a ``chmod -R`` after a
sync gives every old copy a newer change time.

When the compressed file changed, the copy is decompressed again. A copy without a record (made by another tool, an
earlier version, or a job of another cache root reading the same directory; or its record lost with the cache root)
or not the one recorded is compared byte for byte with what its compressed file decompresses to (:func:`vouch_for`,
in a scratch file under the cache root): recorded and read when equal, so that readers with their own records never
replace each other's copies; decompressed again, with a warning, when not. A copy whose compressed file is gone is
all there is (litdata's own reader leaves chunks so), and is read.

The records of a directory are one append-only log in its state directory (under the cache root, never in the
dataset's directory), one JSON line per copy written; the last line of a name wins, a line torn by a killed writer
is ignored, and the log is rewritten without its superseded lines when they outnumber the live ones.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from typing import Any, Sequence

from streaming_core.common.fork_safe import ForkSafeLock
from streaming_core.common.paths import cache_root, state_dir
from streaming_core.storage.facade import temp_name

__all__ = ['RECORD_NAME', 'copy_is_current', 'copies_current', 'decompress_beside', 'note_copy', 'vouch_for']

logger = logging.getLogger(__name__)

#: The log of the decompressed copies of a directory read in place, in its state directory.
RECORD_NAME = 'inplace-copies.log'
#: A log is compacted when it holds this many lines more than twice its live records.
COMPACT_SLACK = 1024
_Record = tuple[list[int], list[int]]
#: ``log path -> (its inode, bytes read, lines read, {copy name: (compressed file's identity, copy's identity)})``.
_records: dict[str, tuple[int | None, int, int, dict[str, _Record]]] = {}
_logs: dict[tuple[str, str], str] = {}  # (cache root, local directory) -> its log (state_dir resolves, hashes)
_lock = ForkSafeLock()  # held while a prefetch thread reads the log: never inherited held by a forked worker


def _identity(info: os.stat_result) -> list[int]:
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _log(local_dir: str, create: bool = False) -> str:
    if create:
        return os.path.join(state_dir(local_dir, create=True), RECORD_NAME)
    key = (cache_root(), local_dir)
    path = _logs.get(key)
    if path is None:
        path = _logs[key] = os.path.join(state_dir(local_dir, create=False), RECORD_NAME)
    return path


def _parse(data: bytes, table: dict[str, _Record]) -> int:
    """Add the records of the complete lines of ``data`` to ``table``; return how many lines there were."""
    lines = 0
    for line in data.splitlines():
        if not line:
            continue
        lines += 1
        try:
            name, zipped, raw = json.loads(line)
        except (ValueError, TypeError):
            continue  # torn by a writer killed mid-line, or not ours
        if isinstance(name, str) and isinstance(zipped, list) and isinstance(raw, list):
            table[name] = (zipped, raw)
    return lines


def _table(path: str) -> dict[str, _Record]:
    """The records of the log at ``path``, reading only what was appended since the last call (a log of many
    copies is never parsed whole again while a first epoch appends to it)."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    with _lock:
        inode, done, lines, table = _records.get(path, (None, 0, 0, {}))
        if inode == info.st_ino and done == info.st_size:
            return table
        if inode != info.st_ino or done > info.st_size:  # another log (compacted, or the cache root wiped)
            done, lines, table = 0, 0, {}
        try:
            with open(path, 'rb') as handle:
                handle.seek(done)
                data = handle.read(info.st_size - done)
        except OSError:
            return table
        complete = data.rfind(b'\n') + 1  # a line still being appended is read next time
        table = dict(table)
        lines += _parse(data[:complete], table)
        _records[path] = (info.st_ino, done + complete, lines, table)
        if lines > 2 * len(table) + COMPACT_SLACK:
            _compact(path, table)
        return table


def _compact(path: str, table: dict[str, _Record]) -> None:
    """Rewrite the log with its live records only (atomically; a record another process appends meanwhile may be
    lost, which costs that copy one more comparison with its compressed file)."""
    tmp = temp_name(path)
    try:
        with open(tmp, 'wb') as handle:
            handle.write(b''.join(_line(name, *record) for name, record in sorted(table.items())))
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.remove(tmp)


def _line(name: str, zipped: list[int], raw: list[int]) -> bytes:
    # Begins with a newline too: a line a killed writer left without its end costs only its own record.
    return ('\n' + json.dumps([name, zipped, raw]) + '\n').encode('utf-8', 'surrogateescape')


def _state(local_dir: str, name: str, raw_path: str, zip_path: str) -> str:
    """``'current'``, ``'absent'`` (no copy), ``'unrecorded'``, ``'zip-changed'`` or ``'copy-changed'``."""
    try:
        raw = os.stat(raw_path)
    except FileNotFoundError:
        return 'absent'
    try:
        zipped = os.stat(zip_path)
    except FileNotFoundError:
        return 'current'  # only the copy is there: all there is
    record = _table(_log(local_dir)).get(name)
    if record is None:
        return 'unrecorded'
    if record[0] != _identity(zipped):
        return 'zip-changed'
    return 'current' if record[1] == _identity(raw) else 'copy-changed'


def copy_is_current(local_dir: str, name: str, raw_path: str, zip_path: str) -> bool:
    """Whether the copy ``raw_path`` (named ``name`` in ``local_dir``) may be read: it exists, and its compressed file
    ``zip_path`` is gone, or both are still the files recorded when the copy was made."""
    return _state(local_dir, name, raw_path, zip_path) == 'current'


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


def note_copy(local_dir: str, name: str, before: os.stat_result, raw_path: str) -> None:
    """Record the copy ``raw_path`` (named ``name``) as decompressed from the compressed file whose stat was
    ``before`` when decompression began. A cache root that cannot be written (or is full) keeps no record: the copy
    is then decompressed again by the next process."""
    try:
        line = _line(name, _identity(before), _identity(os.stat(raw_path)))
        fd = os.open(_log(local_dir, create=True), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write: appends of other processes never split it
        finally:
            os.close(fd)
    except OSError as err:
        logger.debug('no record of %s kept (%s: %s)', raw_path, type(err).__name__, err)


def decompress_beside(stream: Any, reader: Any, raw: Any, zipped: Any, raw_path: str, zip_path: str) -> None:
    """Make the copy ``raw_path`` of ``zip_path`` current in a directory read in place. A copy without a record, or
    not the one recorded, is first compared with what ``zip_path`` decompresses to (:func:`vouch_for`) and kept when
    equal; otherwise ``zip_path`` is decompressed (through the stream's overridable ``_decompress_shard_part``) and
    the copy recorded. Where the directory cannot be written, an existing copy is compared instead.

    Raises:
        ShardCorruptError: that copy differs from what its compressed file decompresses to.
    """
    def compare() -> bool:
        return vouch_for(stream.local_dir, raw.basename, raw_path, zip_path,
                         lambda target: stream._decompress(reader.compression, zip_path, target, raw))
    state = _state(stream.local_dir, raw.basename, raw_path, zip_path)
    vouched = None
    if state in ('unrecorded', 'copy-changed'):  # another reader's copy, or ours replaced: compared, not replaced
        vouched = compare()
        if vouched:
            return
        logger.warning('%s is not what %s decompresses to (a copy of another version, or damaged): decompressing '
                       'it again', raw_path, zip_path)
    before = os.stat(zip_path)
    try:
        stream._decompress_shard_part(zipped, zip_path, raw_path, reader.compression)
    except OSError as err:
        if not isinstance(err, PermissionError) and err.errno != errno.EROFS or not os.path.isfile(raw_path):
            raise
        if vouched is None and compare():
            return
        from streaming_core.errors import ShardCorruptError
        raise ShardCorruptError(
            f'{raw_path} is not what {zip_path} decompresses to (a copy of an earlier version of the file?), and it '
            f'cannot be replaced ({type(err).__name__}: {err}). Remove the copy, or read the dataset from a directory '
            f'this job can write (remote=<this directory>, local=<another>).') from err
    if os.path.isfile(raw_path):
        note_copy(stream.local_dir, raw.basename, before, raw_path)


def vouch_for(local_dir: str, name: str, raw_path: str, zip_path: str, decompress: Any) -> bool:
    """Whether the copy ``raw_path`` (one without a record, or not the one recorded) holds exactly what ``zip_path``
    decompresses to (``decompress(target)`` writes that into ``target``, a scratch file in the state directory);
    recorded when it does, so that the copy is read without being replaced (another reader's copy, in a directory
    several cache roots read, or one this job cannot write). False when the scratch file cannot be written."""
    before = os.stat(zip_path)
    scratch = temp_name(os.path.join(state_dir(local_dir), 'vouch'))  # a killed reader's: swept (temp_sweep)
    try:
        try:
            decompress(scratch)
        except OSError as err:  # the cache root is full or read-only: the copy is made again instead
            logger.debug('cannot compare %s with %s (%s: %s)', raw_path, zip_path, type(err).__name__, err)
            return False
        from streaming_core.reading.listing_entries import same_bytes
        if not same_bytes(raw_path, scratch):
            return False
    finally:
        if os.path.exists(scratch):
            os.remove(scratch)
    note_copy(local_dir, name, before, raw_path)
    return True
