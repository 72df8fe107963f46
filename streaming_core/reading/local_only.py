"""The index of a stream without a remote, and the record that claims its directory.

A stream without a remote reads its local ``index.json`` (its identity is the file's ``(size, mtime_ns, inode,
ctime_ns)``), the index another library's ``index.json`` derives, or an index derived from the directory's files.

Such a directory is the user's own data. The first construction that reads it records it in its state directory
as a dataset read in place (the record a stream with ``remote`` equal to ``local`` writes), unless a record is there
already: a later stream that names a remote for the same ``local`` is then refused
(:class:`~streaming_core.reading.cache_record.CacheRemoteMismatchError`) instead of adopting the directory as its
cache and replacing files of the same names.

A directory that is recorded as the local copy of a remote (``remote=`` was given before: a copy read offline) and
that has no ``index.json`` but an index derived from the remote's files is read through that recorded index: the
copy of a remote whose files were only partly downloaded holds a subset of them, and reading the subset as if it
were the dataset would be silent. A file that was never downloaded then fails, naming it, when it is read, as a
shard missing from an MDS copy does.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from streaming_core.common.paths import state_dir
from streaming_core.reading.cache_record import (
    RECORD_NAME,
    CacheRecord,
    FileIdentity,
    file_id_text,
    file_identity,
    in_place_record,
    is_in_place,
    read_record,
    remote_keys,
    sha256_hex,
    write_record,
)
from streaming_core.reading.index_sync import (
    INDEX_LOCK_BYTE,
    MissingIndexError,
    SyncedIndex,
    binary_present,
    derivable,
    derived,
    foreign_obj,
    read_index_file,
)
from streaming_core.reading.listing_watch import COPY_SUFFIX

__all__ = ['sync_local_only', 'claim_in_place']

logger = logging.getLogger('streaming_core.reading.local_only')


def sync_local_only(stream: Any, path: str) -> SyncedIndex:
    """The index version a stream without a remote loads (``path``: its ``index.json``)."""
    ident_now = file_identity(path)
    if ident_now is not None and binary_present(stream.local_dir, file_id_text(ident_now)):
        claim_in_place(stream, file_id_text(ident_now), only_if_absent=True)
        return SyncedIndex(path, None, file_id_text(ident_now), ident_now)  # warm: no byte of it read
    warm = _foreign_warm(stream, ident_now) if ident_now is not None else None
    if warm is not None:
        claim_in_place(stream, warm.identity, only_if_absent=True)
        return warm
    try:
        data, ident = read_index_file(path)
    except FileNotFoundError:
        if derivable(stream.local_dir):
            from streaming_core.reading.derived_index import NoDatasetError, NoLocalDatasetError
            try:
                return _derived_locked(stream)
            except NoLocalDatasetError:
                raise  # says it all (a copy whose recorded index is lost)
            except NoDatasetError as err:
                raise NoLocalDatasetError(f'No `remote` provided, but local file {path} does not exist either: '
                                          f'{err}') from None
        raise MissingIndexError(f'No `remote` provided, but local file {path} does not exist either.') from None
    foreign = foreign_obj(data)
    if foreign is not None:
        return _foreign_locked(stream, data, foreign, ident)
    claim_in_place(stream, file_id_text(ident), data)
    return SyncedIndex(path, data, file_id_text(ident))


def claim_in_place(stream: Any, identity: str, data: bytes | None = None, *, only_if_absent: bool = False,
                   locked: bool = False) -> None:
    """Record ``stream``'s local directory (no remote) as a dataset read in place, with index version ``identity``
    (the bytes ``data`` when read), unless a record is there: another remote's (a copy read offline) is left as it
    is, and one of this directory is updated to the version read. The record is read and written under the stream's
    index lock (``locked``: the caller holds it), so a job copying a remote into the directory at that moment keeps
    its record. A state directory that cannot be written (a read-only cache root) only loses this protection, and a
    debug log says so."""
    local_dir = stream.local_dir

    def settled(record: CacheRecord | None) -> bool:  # another remote's record, or this version's already
        return record is not None and (record.remote_key not in remote_keys(local_dir)
                                       or record.source_identity == identity)

    try:
        if only_if_absent and os.path.exists(os.path.join(state_dir(local_dir, create=False), RECORD_NAME)):
            return
        sdir = state_dir(local_dir)
        if settled(read_record(sdir)):
            return
        locks = None if locked else stream.locks()
        if locks is not None:
            locks.acquire(INDEX_LOCK_BYTE, True, stream.wait_timeout, f'the index check of {local_dir}')
        try:
            if settled(read_record(sdir)):  # again, under the lock
                return
            write_record(sdir, in_place_record(local_dir, stream.split, identity, sha256_hex(data) if data else ''))
        finally:
            if locks is not None:
                locks.release(INDEX_LOCK_BYTE)
    except OSError as err:
        logger.debug('cannot record %s as read in place: %s', local_dir, err)


def _recorded_copy(stream: Any, sdir: str) -> SyncedIndex | None:
    """The index derived from a remote's files that the directory's record names, when the directory is the local
    copy of that remote (see the module docstring), else None.

    Raises:
        NoLocalDatasetError: the directory is a copy of a remote, but the index of that remote's files is not kept
            (or damaged): its files alone would be a silent subset.
    """
    record = read_record(sdir)
    if record is None or is_in_place(record.remote_dir, stream.local_dir):
        return None
    if not record.source_identity.startswith('derived:'):  # a copy of a remote with its own index.json: not that
        return None
    from streaming_core.reading.derived_index import (
        DERIVED_INDEX_NAME,
        NoLocalDatasetError,
        kept_index,
        read_listing,
    )
    listing = read_listing(sdir)
    path = os.path.join(sdir, DERIVED_INDEX_NAME)
    data = None
    if listing is not None and listing.get('identity') == record.source_identity:
        data = kept_index(path, listing, record.source_identity)
    if data is None:
        raise NoLocalDatasetError(
            f'{stream.local_dir} is a local copy of {record.remote_dir}, whose files were only partly downloaded '
            f'perhaps, and the index of all of them that was recorded with it is missing or damaged: reading the '
            f'files that are there would silently read a part of the dataset. Read it with remote='
            f'{record.remote_dir!r} (once, online, to record the index again); or, if the directory no longer holds '
            f'that copy (your own files now), remove {os.path.join(sdir, RECORD_NAME)}, our record of it.')
    logger.info('%s is the local copy of %s: reading it through the index of all its files, not only the ones '
                'downloaded', stream.local_dir, record.remote_dir)
    return SyncedIndex(path, data, record.source_identity + COPY_SUFFIX)


def _derived_locked(stream: Any) -> SyncedIndex:
    """The index derived from the files of the local directory (or the one its record names, see
    :func:`_recorded_copy`), under the stream's index lock."""
    sdir = state_dir(stream.local_dir)
    locks = stream.locks()
    locks.acquire(INDEX_LOCK_BYTE, True, stream.wait_timeout, f'the index check of {stream.local_dir}')
    try:
        copy = _recorded_copy(stream, sdir)
        if copy is not None:
            return copy
        synced = derived(stream, stream.local_dir, sdir, copies=False)
        claim_in_place(stream, synced.identity, synced.data, locked=True)
        return synced
    finally:
        locks.release(INDEX_LOCK_BYTE)


def _foreign_locked(stream: Any, data: bytes, obj: dict[str, Any], stat: FileIdentity) -> SyncedIndex:
    """The index derived from a local foreign ``index.json`` (``stat`` of the bytes ``data``), under the stream's
    index lock."""
    from streaming_core.reading.foreign_index import derive_foreign_index
    sdir = state_dir(stream.local_dir)
    locks = stream.locks()
    locks.acquire(INDEX_LOCK_BYTE, True, stream.wait_timeout, f'the index check of {stream.local_dir}')
    try:
        synced = SyncedIndex(*derive_foreign_index(stream, stream.local_dir, sdir, data, obj, copies=False,
                                                   stat=stat))
        claim_in_place(stream, synced.identity, synced.data, locked=True)
        return synced
    finally:
        locks.release(INDEX_LOCK_BYTE)


def _foreign_warm(stream: Any, stat: FileIdentity) -> SyncedIndex | None:
    """A local foreign ``index.json`` unchanged since its index was derived with the same builders and options, whose
    binary index exists: the derived index, no byte of the foreign one read (None otherwise)."""
    from streaming_core.reading.derived_index import DERIVED_LISTING_NAME
    sdir = state_dir(stream.local_dir, create=False)
    if not os.path.exists(os.path.join(sdir, DERIVED_LISTING_NAME)):
        return None
    from streaming_core.reading.foreign_index import kept_foreign
    kept = kept_foreign(stream, sdir, stat)
    if kept is None:
        return None
    path, identity, found = kept
    if not binary_present(stream.local_dir, identity):
        return None
    return SyncedIndex(path, None, identity, found)
