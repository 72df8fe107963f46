"""A running job never reads files of another version of its data than the index it was built from.

Another process may refresh a local directory for a new version of its remote while a job reads it (a job started
later on the same ``local``, after the remote was rewritten): the refresh removes the local files the new index no
longer vouches for, and readers download the new version's files in their place. A job built from the old index
would then read them under its own index, silently. Every such refresh counts in the directory's purge counter (a
small file in its state directory, see :func:`note_purge`) when it removed a file or changed an entry of the old
version (a file it did not hold may be downloading for a job of that version); a dataset notes the counter when it
loads its index, and before it opens a shard's files, or renames a downloaded one into place (:func:`installing`),
checks that no purge happened since, or that the directory still holds its own version
(:func:`check_still_current`). Refreshes that change no entry of the old version (files added with hashes, the
same version named anew) stop no one. A local dataset without a remote compares its ``index.json`` (size,
modification time, inode) instead.

Both checks cost one ``stat`` each while nothing changed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from streaming_core.common.paths import state_dir
from streaming_core.errors import DatasetVersionError
from streaming_core.reading.cache_record import (
    file_id_text,
    file_identity,
    read_record,
    same_version,
    stat_identity,
)
from streaming_core.storage.facade import write_file_atomic

__all__ = ['INDEX_LOCK_BYTE', 'PURGES_NAME', 'purge_count', 'note_purge', 'check_still_current', 'installing']

#: The byte of a stream's lock file that guards its index and record (held exclusively by a refresh, shared by a
#: file being installed: :func:`installing`).
INDEX_LOCK_BYTE = 0
#: The purge counter's file name in a state directory.
PURGES_NAME = 'purges'

_CTIME_NS = re.compile(r';ctime_ns=\d+')
_counts: dict[str, tuple[tuple[int, ...], int]] = {}  # state directory -> (counter file identity, its count)
_current: set[tuple[str, str, int]] = set()  # (state directory, identity, count): found to hold that version


def _count(sdir: str) -> int:
    path = os.path.join(sdir, PURGES_NAME)
    try:
        key = stat_identity(os.stat(path))
    except OSError:
        return 0
    known = _counts.get(sdir)
    if known is not None and known[0] == key:
        return known[1]
    try:
        with open(path, 'rb') as handle:
            count = int(handle.read().decode('ascii').strip() or 0)
    except (OSError, ValueError):
        count = -1  # damaged: counts as a purge (the record then decides)
    _counts[sdir] = (key, count)
    return count


def purge_count(sdir: str) -> int:
    """How many refreshes of the directory whose state directory is ``sdir`` for another version removed files so
    far (0 when none ever did). Creates the counter at 0 where the state directory has none (a check then costs one
    successful ``stat``)."""
    path = os.path.join(sdir, PURGES_NAME)
    if os.path.isdir(sdir) and not os.path.exists(path):
        try:
            with open(path, 'xb') as handle:  # never over another process's count
                handle.write(b'0')
        except OSError:
            pass
    return _count(sdir)


def note_purge(sdir: str) -> None:
    """Count a refresh of the directory whose state directory is ``sdir`` that removed files (under its index lock)."""
    write_file_atomic(os.path.join(sdir, PURGES_NAME), str(max(_count(sdir), 0) + 1).encode('ascii'), sync=False)


def check_still_current(local_dir: str, identity: str, purges: int, where: Any, sdir: str | None = None) -> None:
    """Before reading files of ``local_dir``: raise if they may belong to another version than ``identity`` (the index
    version the caller's dataset was built from, when the purge counter was ``purges``). ``sdir`` is the state
    directory the counter was read from (the directory's, under the cache root of that moment, by default the
    current one).

    Raises:
        DatasetVersionError: naming the stream (``where``, shown by its ``repr`` only then), the directory and both
            versions.
    """
    if identity.startswith('file:'):  # a local index.json read as it is: it must not have been rewritten
        now = file_identity(os.path.join(local_dir, 'index.json'))
        if now is None or _CTIME_NS.sub('', file_id_text(now)) != _CTIME_NS.sub('', identity):
            raise DatasetVersionError(
                f'The data of {where!r} changed while this job read it: {local_dir}/index.json was '
                f'{"removed" if now is None else "rewritten"} (this job reads {identity}). Reading on would serve '
                f'the new files under this job\'s index. Restart the job to read the new version; write new '
                f'versions of a dataset to new directories.')
    if sdir is None:
        sdir = state_dir(local_dir, create=False)
    count = _count(sdir)
    if count == purges or (sdir, identity, count) in _current:
        return
    record = read_record(sdir)
    if record is None or same_version(record.source_identity, identity):
        _current.add((sdir, identity, count))
        return
    raise DatasetVersionError(
        f'The data of {where!r} changed while this job read it: another process refreshed its local directory '
        f'{local_dir} for another version (index {record.source_identity}; this job reads {identity}) and removed '
        f'files of this version. Reading on would serve the new version\'s files under this job\'s index. Restart '
        f'the job to read the new version, or give jobs that must read different versions different local '
        f'directories.')


@contextmanager
def installing(stream: Any) -> Iterator[None]:
    """Held while a file ``stream`` fetched or decompressed is renamed into its local directory: the directory still
    holds the stream's index version (:func:`check_still_current`), checked under a shared hold of the stream's index
    lock, so that a refresh for another version (which holds it exclusively, and counts a purge when an entry of the
    old version changed) cannot come between the check and the rename. Otherwise a slow download of the old version,
    finished after such a refresh, would be served to every reader of the new one.

    Raises:
        DatasetVersionError: another process refreshed the directory for another version since the stream loaded
            its index (the caller discards the file).
    """
    identity = getattr(stream, 'index_identity', None)
    if identity is None:  # not loaded through get_shards (a subclass's own use): nothing to compare with
        yield
        return
    locks = stream.locks()
    mine = locks.held_exclusive_here(INDEX_LOCK_BYTE)  # this thread refreshes: it must not wait for itself
    if not mine:
        locks.acquire(INDEX_LOCK_BYTE, False, stream.wait_timeout, f'the index check of {stream.local_dir}')
    try:
        check_still_current(stream.local_dir, identity, getattr(stream, 'purges_at_load', 0), stream,
                            getattr(stream, 'purge_dir', None))
        yield
    finally:
        if not mine:
            locks.release(INDEX_LOCK_BYTE)
