"""Bring a stream's local ``index.json`` up to date with its remote, and say which index version it loaded.

Called once per stream per dataset construction (:meth:`streaming_core.reading.stream.Stream.get_shards`). With a
remote, everything happens under the stream's exclusive index lock (a kernel-released byte-range lock in the local
directory's state directory), so the processes of a node never race:

1. The record (:mod:`streaming_core.reading.cache_record`) names another remote while the directory holds an index: a
   :class:`~streaming_core.reading.cache_record.CacheRemoteMismatchError` naming both.
2. The record says the local copy is of the remote's current version: nothing to do. "Current" is decided by the
   remote index's identity (etag / size / modification time) when its backend can tell, which costs one cheap request
   per process; otherwise by a comparison of the index bytes made by any process of the node *after this process
   asked* (a check that started earlier may predate a rewrite of the remote, so it is never reused).
3. Otherwise the remote index is downloaded (into the state directory) and compared with the local copy. When they
   differ, or the remote was rewritten with an identical index, every local file the new version may not share
   with the old one is deleted *before* the new index is renamed into place, then the record is rewritten. A file
   is kept only when both versions of the index record the same size and the same hash for it, so nothing stale is
   ever served (a crash at any point leaves a state the next check repairs).

A directory (remote, in place or local) without ``index.json`` whose files index themselves (``*.parquet``, or the
stream's ``format`` names an index builder) is read through an index derived from its files, built once per node
under the same lock and kept in the state directory (:mod:`streaming_core.reading.derived_index`); an ``index.json``
always wins. An ``index.json`` that is not ours (no ``shards``: litdata's, for one) is handed to the index builder that
claims it, and read through the index derived from it, rebuilt when its content changes (its identity is
``derived:<builder>:<sha256>``); with a remote, the foreign ``index.json`` is copied to the local directory like
ours, and local files the new version does not vouch for are removed first. No builder claiming it is a
:class:`~streaming_core.reading.derived_index.ForeignIndexError` naming the file (and the plugin to install for a known
format).

A local directory with no record (the cache root was wiped or is another one, a copy made by another tool) is
adopted the same way, as if its remote had been rewritten: its files are kept only where both indexes record the
same hash, since a copy of another version can have the same ``index.json`` bytes (fixed-size samples without
hashes). A remote that is
the local directory itself (reading in place) is never copied, refreshed or deleted from. A stream without a
remote reads its local index (:mod:`streaming_core.reading.local_only`, which records the directory as read in
place, so that a remote is refused on it later).

A warm construction reads no byte of ``index.json``: when the identity is known from metadata alone (the local
file's stat, or the record and the remote's stat) and the binary index of that identity exists in the state
directory (:mod:`streaming_core.reading.binary_index`), the :class:`SyncedIndex` carries the file's stat instead of its
bytes; they are read (and checked against that stat) only if the binary index proves unusable and is rebuilt.
"""

from __future__ import annotations

import errno
import logging
import os
import time
import warnings
from typing import Any

from streaming_core.common.paths import COORD_NAME, state_dir
from streaming_core.errors import (
    DatasetVersionError,
    IndexFormatError,
    IndexNotFoundError,
    RemoteNotFoundError,
    StorageError,
    StreamingError,
)
from streaming_core.reading.cache_record import (
    COARSE_MARGIN,
    DIGEST_PART,
    RECORD_NAME,
    CacheRecord,
    CacheRemoteMismatchError,
    FileIdentity,
    coarse_mtime,
    file_id_text,
    file_identity,
    is_in_place,
    read_record,
    remote_key,
    remote_keys,
    same_version,
    sha256_hex,
    stat_identity,
    write_record,
)
from streaming_core.reading.index_file import INDEX_BASENAME, parse_index_text
from streaming_core.reading.index_versions import compare_versions, stale_files
from streaming_core.reading.version_guard import INDEX_LOCK_BYTE, note_purge, purge_count
from streaming_core.storage.facade import (
    download_file,
    is_remote,
    join,
    local_path,
    stat_object,
    temp_name,
    url_scheme,
    write_file_atomic,
)
from streaming_core.storage.redact import redact_url

__all__ = ['SyncedIndex', 'IndexChangedError', 'MissingIndexError', 'sync_index', 'stale_files', 'INDEX_LOCK_BYTE',
           'probe_remote_index', 'REMOTE_INDEX_ABSENT']

logger = logging.getLogger('streaming_core.reading.index_sync')

_REMOTE_COPY = 'remote-index.json'
#: How many times a remote index written while it was read is read again (see ``_Refresh._check``).
_SETTLE_ATTEMPTS = 3


class MissingIndexError(IndexNotFoundError):
    """A stream's ``index.json`` is absent locally and there is no remote to fetch it from (a ``RuntimeError``, as
    the reference raises, and a ``FileNotFoundError``)."""


class IndexChangedError(StreamingError):
    """A local ``index.json`` whose content was not read at construction (its binary index was present) changed
    before it had to be read after all (its binary index turned out unusable)."""


class SyncedIndex:
    """The index version a stream loads.

    Attributes:
        path: The local ``index.json``.
        identity: The index source identity (``stat:...`` from the remote's etag/size/mtime, ``sha256:...`` of the
            index bytes when the backend cannot tell, ``file:...`` for a local index read in place).
        stat: ``(size, mtime_ns, inode, ctime_ns)`` of ``path`` when its bytes were not read at construction
            (``None`` when they were).

    Args:
        path: See above.
        data: The index bytes, read under the index lock (exactly the version ``identity`` names), or ``None``
            when the binary index of ``identity`` was present: a warm construction reads no byte of ``index.json``
            (:attr:`data` reads it on demand, checking that it is still the file ``stat`` describes).
        identity: See above.
        stat: See above (required when ``data`` is ``None``).
    """

    __slots__ = ('path', 'identity', 'stat', '_data', 'purges')

    def __init__(self, path: str, data: bytes | None, identity: str,
                 stat: FileIdentity | None = None) -> None:
        if data is None and stat is None:
            raise ValueError('SyncedIndex: give the index bytes or the stat of the file to read them from later.')
        self.purges: int | None = None  # the directory's purge count under the index lock (see version_guard)
        self.path = path
        self.identity = identity
        self.stat = stat if data is None else None
        self._data = data

    @property
    def data(self) -> bytes:
        """The index bytes (read now when construction did not read them).

        Raises:
            IndexChangedError: the file is no longer the version :attr:`identity` names.
        """
        if self._data is None:
            try:
                data, ident = read_index_file(self.path)
            except FileNotFoundError:
                ident, data = None, b''
            if ident != self.stat:
                raise IndexChangedError(
                    f'{self.path} changed (or was removed) while the dataset was being constructed (expected '
                    f'size, mtime_ns, inode, ctime_ns {self.stat}, found {ident}): construct the dataset again.')
            self._data = data
        return self._data

    @property
    def read_at_sync(self) -> bool:
        """Whether the index bytes were read by the index check (False on a warm start)."""
        return self.stat is None

    def __repr__(self) -> str:
        return f'SyncedIndex(path={self.path!r}, identity={self.identity!r}, read={self._data is not None})'


def read_index_file(path: str) -> tuple[bytes, FileIdentity]:
    """The bytes of the file at ``path`` and the stat of the file they were read from (one open)."""
    with open(path, 'rb') as handle:
        info = os.fstat(handle.fileno())
        data = handle.read()
    return data, stat_identity(info)


def sync_index(stream: Any) -> SyncedIndex:
    """Make the local index of ``stream`` (which has a remote) current (see the module docstring) and return the
    version to load.

    Args:
        stream: A :class:`~streaming_core.reading.stream.Stream` with its defaults applied.

    Raises:
        CacheRemoteMismatchError: the local directory holds another remote's data.
        MissingIndexError: no local index and no remote.
        IndexFormatError: the remote index is not a valid index (naming the remote URL and the local copy).
        StorageError: the remote index cannot be downloaded and there is no local copy to fall back on.
    """
    path = stream.index_path()
    remote = stream.remote_dir
    if not remote:  # the stream reads its local directory alone: streaming_core.reading.local_only
        raise ValueError(f'{stream!r} has no remote: its index is read by local_only.sync_local_only.')
    local_dir = stream.local_dir
    in_place = is_in_place(remote, local_dir)
    request_time = time.time()
    probe = None
    created: list[str] = []  # the directories made here, deepest first
    if not in_place:
        probe = _probe(stream, join(remote, INDEX_BASENAME))
        missing = os.path.abspath(local_dir)
        while not os.path.isdir(missing) and os.path.dirname(missing) != missing:
            created.append(missing)
            missing = os.path.dirname(missing)
        os.makedirs(local_dir, exist_ok=True)
    try:
        return _sync(stream, path, remote, local_dir, in_place, probe, request_time)
    except RemoteNotFoundError:
        for directory in created:  # a remote that does not exist leaves no empty cache directory behind
            try:
                os.rmdir(directory)
            except OSError:  # not empty (another process copied into it), or gone
                break
        raise


def _sync(stream: Any, path: str, remote: str, local_dir: str, in_place: bool, probe: str | None,
          request_time: float) -> SyncedIndex:
    """:func:`sync_index` once the local directory exists (``probe``: the remote index's identity before)."""
    sdir = state_dir(local_dir)
    locks = stream.locks()
    locks.acquire(INDEX_LOCK_BYTE, True, stream.wait_timeout, f'the index check of {path}')
    try:
        if in_place:
            try:
                return _counted(_in_place(stream, path, sdir), sdir)
            except MissingIndexError:
                if not derivable(stream.local_dir):
                    raise
                return _counted(derived(stream, stream.local_dir, sdir, copies=False), sdir)
        try:
            synced = _Refresh(stream, path, sdir, probe, request_time).run()
            if probe is not None and same_version(probe, synced.identity):
                stream._remote_confirmed_at = request_time  # remote_watch: confirmed now, not again at once
            return _counted(synced, sdir)
        except RemoteNotFoundError as err:  # no index.json on the remote: an index derived from the files?
            if not derivable(remote, err):
                raise
            from streaming_core.reading.derived_index import ListingUnavailableError
            try:
                return _counted(derived(stream, remote, sdir, copies=True), sdir)
            except ListingUnavailableError as listing:  # a store that cannot list (HTTP): the index is just missing
                raise type(err)(
                    f'{err} Without an {INDEX_BASENAME}, a directory is read through an index derived from its files '
                    f'(Parquet, WebDataset...), which needs a listing, and {redact_url(remote)} cannot be listed '
                    f'(plain HTTP has no listing): read the files from a store that lists (a local path, s3://, '
                    f'gs://...), or convert them to a dataset with an {INDEX_BASENAME} and serve that (streaming '
                    f'convert parquet SRC OUT, for Parquet files).') from listing.__cause__
    finally:
        locks.release(INDEX_LOCK_BYTE)


def _unknown_provenance(record: CacheRecord | None, local_now: FileIdentity | None) -> bool:
    """Whether a local copy is of unknown provenance: no record (the cache root wiped, or another one), or a local
    ``index.json`` that is not the file the record describes (replaced by a process recording under another cache
    root: another size, mtime or inode; a chmod, chown or hard link moves only the change time). Its files may be of
    another version with the same index bytes (fixed-size samples without hashes)."""
    return record is None or (record.local_stat is not None and local_now is not None
                              and local_now[:3] != record.local_stat[:3])


def binary_present(local_dir: str, identity: str) -> bool:
    """Whether the binary index of the index version ``identity`` exists (then the index bytes need not be read:
    :func:`streaming_core.reading.binary_index.load_or_build` maps it, and reads them only if it proves unusable)."""
    from streaming_core.reading.binary_index import binary_path
    return os.path.exists(binary_path(state_dir(local_dir, create=False), identity))


def derivable(source: str, err: BaseException | None = None) -> bool:
    """Whether a directory without ``index.json`` should be indexed from its files: the missing object is the index
    itself (not its bucket or a credentials problem) and the directory can be listed."""
    if err is not None and INDEX_BASENAME not in str(err):
        return False
    if not is_remote(source):
        return os.path.isdir(local_path(source))
    return True


def _holds_files(directory: str) -> bool:
    """Whether ``directory`` holds anything but the lock file earlier versions kept there."""
    try:
        return any(name != COORD_NAME for name in os.listdir(directory))
    except OSError:
        return False


def _counted(synced: SyncedIndex, sdir: str) -> SyncedIndex:
    """``synced`` with the directory's purge count read under the index lock (a refresh by another process after
    the lock is released then counts against this version)."""
    synced.purges = purge_count(sdir)
    return synced


def derived(stream: Any, source: str, sdir: str, *, copies: bool) -> SyncedIndex:
    """The index derived from the files of ``source`` (see :mod:`streaming_core.reading.derived_index`), recorded like a
    remote index so that another remote is refused later."""
    from streaming_core.reading.derived_index import derive_index
    record = read_record(sdir)
    if copies and record is not None and record.remote_key not in remote_keys(stream.remote_dir):
        present = [name for name in os.listdir(stream.local_dir)] if os.path.isdir(stream.local_dir) else []
        if present:
            raise _Refresh(stream, stream.index_path(), sdir, None, 0.0)._mismatch(record)
    path, data, identity = derive_index(stream, source, sdir, copies=copies)
    if stream.remote_dir and (record is None or record.source_identity != identity
                              or record.remote_key not in remote_keys(stream.remote_dir)):
        write_record(sdir, _new_record(stream, stream.local_dir, identity, sha256_hex(data), None, time.time()))
    return SyncedIndex(path, data, identity)


def foreign_obj(data: bytes) -> dict[str, Any] | None:
    """The parsed ``index.json`` bytes ``data`` when they are another library's index (no ``shards``), else None."""
    from streaming_core.reading.foreign_index import foreign_index
    return foreign_index(data)


#: The remote index's "identity" when the remote has no ``index.json``: deleted, or a writer rewriting the remote
#: (it removes the index first and commits the new one last). Never the version a job read.
REMOTE_INDEX_ABSENT = 'absent (no index.json there)'


def probe_remote_index(stream: Any) -> str | None:
    """The identity of the stream's remote ``index.json`` now, from one stat (None: unknown or unreachable;
    :data:`REMOTE_INDEX_ABSENT` when it does not exist)."""
    return _probe(stream, join(stream.remote_dir, INDEX_BASENAME), absent=REMOTE_INDEX_ABSENT)


def _probe(stream: Any, url: str, absent: str | None = None) -> str | None:
    """The remote index's identity without downloading it (``None``: unknown or unreachable; the download that
    follows then decides, and reports errors; ``absent`` when the object does not exist)."""
    try:
        found = stat_object(url, timeout=float(stream.download_timeout), options=stream.storage_options,
                            retries=int(stream.download_retry))
    except RemoteNotFoundError:
        return absent
    except Exception as err:  # the download below reports the failure properly
        logger.debug('stat of %s failed: %s', redact_url(url), err)
        return None
    if found is None or (found.etag is None and found.mtime is None):  # a size alone identifies no version
        return None
    return f'stat:{found.identity}'


def _new_record(stream: Any, local_dir: str, identity: str, sha: str, stat: FileIdentity | None,
                checked_at: float) -> CacheRecord:
    remote = stream.remote_dir
    # ``remote`` as written, ``remote_dir`` a path made absolute: from elsewhere the text names another place
    remote_dir = os.path.abspath(remote) if url_scheme(remote) == '' else redact_url(remote)
    return CacheRecord(local_dir=os.path.realpath(local_dir), remote=redact_url(stream.remote),
                       remote_dir=remote_dir, remote_key=remote_key(remote), split=stream.split,
                       source_identity=identity, index_sha256=sha, index_stat=list(stat) if stat else None,
                       checked_at=checked_at)


def _in_place(stream: Any, path: str, sdir: str) -> SyncedIndex:
    """The remote is the local directory: read it as it is; record it (so another remote is refused later)."""
    ident_now = file_identity(path)
    if ident_now is not None:
        record = read_record(sdir)
        identity = file_id_text(ident_now)
        if record is not None and record.source_identity == identity and binary_present(stream.local_dir, identity):
            return SyncedIndex(path, None, identity, ident_now)  # warm: recorded, and its binary index exists
    try:
        data, ident = read_index_file(path)
    except FileNotFoundError:
        raise MissingIndexError(f'The remote {redact_url(stream.remote_dir)} is the local directory itself and has '
                                f'no {INDEX_BASENAME} ({path}).') from None
    identity = file_id_text(ident)
    foreign = foreign_obj(data)
    if foreign is not None:
        from streaming_core.reading.foreign_index import derive_foreign_index
        path, data, identity = derive_foreign_index(stream, stream.local_dir, sdir, data, foreign, copies=False)
    record = read_record(sdir)
    if record is None or (record.remote_key in remote_keys(stream.remote_dir) and record.source_identity != identity):
        write_record(sdir, _new_record(stream, stream.local_dir, identity, sha256_hex(data), ident, time.time()))
    return SyncedIndex(path, data, identity)


class _Refresh:
    """One check of a stream's local index against its remote, under the index lock."""

    def __init__(self, stream: Any, path: str, sdir: str, probe: str | None, request_time: float) -> None:
        self.stream = stream
        self.path = path
        self.sdir = sdir
        self.probe = probe
        self.probe_after: str | None = None  # the remote's stat just after the last download (see _identity_of)
        self.request_time = request_time
        self.remote_index = join(stream.remote_dir, INDEX_BASENAME)
        self.shown = redact_url(self.remote_index)

    def run(self) -> SyncedIndex:
        stream, path = self.stream, self.path
        record = read_record(self.sdir)
        local_now = file_identity(path)
        in_place = None
        if record is not None and record.remote_key not in remote_keys(stream.remote_dir):
            if local_now is not None and is_in_place(record.remote_dir, stream.local_dir):
                in_place = record  # a dataset of its own: adopted only as an exact copy of the remote (see _check)
            elif local_now is not None or _holds_files(stream.local_dir):  # read in place: maybe no index.json
                raise self._mismatch(record)
            record = None  # the directory no longer holds what the record describes
        if record is not None and local_now is not None and local_now == record.local_stat and self._fresh(record):
            if binary_present(stream.local_dir, record.source_identity):  # warm: no byte of the index read
                return SyncedIndex(path, None, record.source_identity, local_now)
            data, ident = read_index_file(path)
            if ident == local_now:
                return SyncedIndex(path, data, record.source_identity)
        return self._check(record, local_now, in_place)

    def _identity_of(self, new: bytes) -> str:
        """The identity of the downloaded index bytes ``new``: the remote's stat when it is still the one probed
        before the lock (so these bytes are that version), else the digest of the bytes (the remote changed between
        the probe and the download: the probe names another version). A coarse stat (:func:`coarse_mtime`: no etag,
        time to the second) may name two versions, so the digest is added to it (:data:`DIGEST_PART`)."""
        digest = sha256_hex(new)
        self.probe_after = None
        if self.probe is None:
            return f'sha256:{digest}'
        again = self.probe_after = _probe(self.stream, self.remote_index)
        if again != self.probe:
            logger.info('%s changed while it was checked; identifying the version read by its digest', self.shown)
            return f'sha256:{digest}'
        return f'{self.probe}{DIGEST_PART}{digest}' if coarse_mtime(self.probe) is not None else self.probe

    def _fresh(self, record: CacheRecord) -> bool:
        if self.probe is not None:
            if not same_version(self.probe, record.source_identity):
                return False
            modified = coarse_mtime(self.probe)  # a stat to the second, no etag: a later write may look the same
            return modified is None or record.checked_at >= modified + COARSE_MARGIN
        return record.source_identity.startswith('sha256:') and record.checked_at >= self.request_time

    def _mismatch(self, record: CacheRecord) -> CacheRemoteMismatchError:
        stream = self.stream
        here = redact_url(stream.remote_dir)
        if is_in_place(record.remote_dir, stream.local_dir):
            return CacheRemoteMismatchError(
                f'Local directory {stream.local_dir} was written or read in place as a dataset of its own (with no '
                f'`remote`): one local directory holds one dataset, and using it as the cache of {here} would replace '
                f'its files (an exact copy, with the remote\'s index and a recorded hash for each file, is taken '
                f'as its cache without this error). Use another `local` for {here}. If it is in fact a copy of {here} '
                f'(made by hand, or uploaded there), remove {os.path.join(self.sdir, RECORD_NAME)} (our record that it '
                f'is a dataset of its own, not your data) and construct again: it is then adopted as the cache of '
                f'{here}, and its files that the remote\'s index does not vouch for by a hash are downloaded again.')
        note = ''
        if record.remote == redact_url(stream.remote):  # one text, two directories: a relative path, a link moved
            note = f' (the same text, which now names the directory {os.path.realpath(local_path(here))})'
        return CacheRemoteMismatchError(
            f'Local directory {stream.local_dir} holds a copy of {record.describe()}, not of {here}{note}: one local '
            f'directory caches one remote. Use another `local` for {here}, or, if the copy of {record.remote_dir} '
            f'is no longer needed, delete {stream.local_dir} (for a default local directory: `streaming cache clear '
            f'--dataset URL`) and construct again.')

    def _check(self, record: CacheRecord | None, local_now: FileIdentity | None,
               in_place: CacheRecord | None = None) -> SyncedIndex:
        """Download the remote index and bring the local copy to its version (``in_place``: the record of a directory
        written or read in place, adopted only when it is an exact copy of the remote: the same index bytes, and every
        file it holds proven the remote's by its recorded hash; else refused, nothing touched)."""
        stream, path = self.stream, self.path
        started = time.time()
        tmp = temp_name(os.path.join(self.sdir, _REMOTE_COPY))
        try:
            previous = None
            for attempt in range(_SETTLE_ATTEMPTS):
                try:
                    download_file(self.remote_index, tmp, timeout=float(stream.download_timeout),
                                  retries=int(stream.download_retry), options=stream.storage_options)
                except (StorageError, FileNotFoundError) as err:
                    if in_place is not None:  # never read offline as a copy of the remote: it is not known to be one
                        refused = self._mismatch(in_place)
                        raise type(refused)(f'The remote index {self.shown} could not be read ({err}): check `remote`. '
                                            f'{refused}') from err
                    if local_now is None:
                        raise
                    return self._offline(record, local_now, err)
                with open(tmp, 'rb') as handle:
                    new = handle.read()
                identity = self._identity_of(new)
                if self.probe is None or not identity.startswith('sha256:') or self.probe_after is None:
                    break  # a version by its stat, or no stat to read it again under
                if new == previous and is_remote(stream.remote_dir):  # the same bytes under another stat: an object
                    break  # store whose etag moves without a write (a CDN, servers behind a balancer): by its digest
                if attempt + 1 == _SETTLE_ATTEMPTS:
                    raise DatasetVersionError(
                        f'The remote index {self.shown} changed {_SETTLE_ATTEMPTS} times while it was read: a writer '
                        f'is rewriting the dataset. Nothing was changed in {stream.local_dir}; construct again once '
                        f'the writer has finished.')
                # Written while it was read: read it again under its new stat, so that the version has an identity
                # the stream can watch while it downloads (a digest cannot be compared with the remote's stat).
                previous, self.probe = new, self.probe_after
            foreign = foreign_obj(new)
            if in_place is not None and (foreign is not None or read_index_file(path)[0] != new):
                raise self._mismatch(in_place)
            if foreign is not None:
                return self._foreign(new, foreign, record, local_now, started)
            try:
                new_obj = parse_index_text(new, self.shown)
            except IndexFormatError as err:
                state = 'was left as it was' if local_now is not None else 'was not created'
                raise IndexFormatError(f'The remote index {self.shown} is not a valid index: {err} The local copy '
                                       f'{path} {state}. Fix the remote index (or point `remote` at the right '
                                       f'location) and construct again.') from err
            old = None
            if local_now is not None:
                with open(path, 'rb') as handle:
                    old = handle.read()
            unknown = _unknown_provenance(record, local_now)
            if old == new:  # rewritten with the same bytes? the remote's stat says so (whatever names the bytes read)
                rewritten = unknown or (self.probe is not None and (  # a digest names bytes, not a version
                    record.source_identity.startswith('sha256:')
                    or record.source_identity.startswith('stat:')
                    and not same_version(record.source_identity, self.probe)))
                stale = stale_files(_parse_or_none(old, path), new_obj, stream.local_dir, unknown) if rewritten else []
                changed = rewritten
            else:
                stale, changed = compare_versions(_parse_or_none(old, path), new_obj, stream.local_dir, unknown)
            if in_place is not None and stale:  # a file no hash proves the remote's: it would be replaced
                raise self._mismatch(in_place)
            removed = _remove(stale)
            if removed or changed:
                # A job still reading the old version must neither read what replaces the removed files nor install
                # its own copy of a changed file (one it is downloading now) for readers of the new version.
                note_purge(self.sdir)
            if record is None:
                _remove([os.path.join(stream.local_dir, COORD_NAME)])  # an earlier version's lock file
            if old != new or (unknown and removed):  # a new file: a record under another cache root sees a change
                write_file_atomic(path, new)
            if old is None:
                logger.info('%s: copied to %s', self.shown, path)
            elif removed or old != new:
                logger.info('%s changed: refreshed %s, removed %d stale local file(s)', self.shown, path, removed)
            write_record(self.sdir, _new_record(stream, stream.local_dir, identity, sha256_hex(new),
                                                file_identity(path), started))
            return SyncedIndex(path, new, identity)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def _foreign(self, new: bytes, obj: dict[str, Any], record: CacheRecord | None,
                 local_now: FileIdentity | None, started: float) -> SyncedIndex:
        """The remote ``index.json`` is not ours: read the remote through the index derived from it (rebuilt when it
        changed, stale local copies removed first), and keep a copy of it in the local directory."""
        from streaming_core.reading.derived_index import read_listing
        from streaming_core.reading.derived_index import write_record as write_listing_record
        from streaming_core.reading.foreign_index import derive_foreign_index
        stream, path = self.stream, self.path
        listing = read_listing(self.sdir)
        seen = (listing or {}).get('remote_stat')  # the remote index's stat when the copies were made
        rewritten = local_now is not None and (_unknown_provenance(record, local_now) or (
            self.probe is not None and isinstance(seen, str) and not same_version(seen, self.probe)))
        previous = []
        if local_now is not None:
            with open(path, 'rb') as handle:
                old = _parse_or_none(handle.read(), path)  # a streaming index cached here before
            if old is not None:
                previous.append(old)
        derived, data, identity = derive_foreign_index(stream, stream.remote_dir, self.sdir, new, obj, copies=True,
                                                       previous=previous, rewritten=rewritten)
        listing = read_listing(self.sdir)
        if listing is not None and self.probe is not None and listing.get('remote_stat') != self.probe:
            write_listing_record(self.sdir, {**listing, 'remote_stat': self.probe})
        if record is None:
            _remove([os.path.join(stream.local_dir, COORD_NAME)])  # an earlier version's lock file
        if file_identity(path) is None or read_index_file(path)[0] != new:
            write_file_atomic(path, new)
        write_record(self.sdir, _new_record(stream, stream.local_dir, identity, sha256_hex(data), file_identity(path),
                                            started))
        return SyncedIndex(derived, data, identity)

    def _offline(self, record: CacheRecord | None, local_now: FileIdentity,
                 err: BaseException) -> SyncedIndex:
        """The remote index cannot be read, but a local copy exists: use it, saying that it may be out of date."""
        data, ident = read_index_file(self.path)
        recorded = record is not None and ident == record.local_stat
        identity = record.source_identity if recorded and record is not None else file_id_text(ident)
        when = (time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(record.checked_at))
                if recorded and record is not None else 'an unknown time (no record)')
        message = (f'Cannot read the remote index {self.shown} ({type(err).__name__}: {err}); using the local copy '
                   f'{self.path}, last compared with the remote at {when}. It may be out of date.')
        if isinstance(err, FileNotFoundError):  # no index there: deleted, or a writer rewriting the remote
            self.stream._remote_index_now = REMOTE_INDEX_ABSENT  # downloads must match the copy's hashes
            message += (' The remote has no index.json (deleted, or being rewritten): a shard missing here is '
                        'downloaded only if it matches a hash the local copy records; without one, reading it stops '
                        'the job (DatasetVersionError).')
        warnings.warn(message, stacklevel=2)
        logger.warning(message)
        foreign = foreign_obj(data)
        if foreign is not None:  # a copy of a foreign index: its derived index (cached unless the copy changed)
            from streaming_core.reading.foreign_index import derive_foreign_index
            return SyncedIndex(*derive_foreign_index(self.stream, self.stream.remote_dir, self.sdir, data, foreign,
                                                     copies=False))
        return SyncedIndex(self.path, data, identity)


def _parse_or_none(data: bytes | None, path: str) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        return parse_index_text(data, path)
    except IndexFormatError:
        return None


def _remove(paths: list[str]) -> int:
    removed = 0
    for path in paths:
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as err:  # a directory where the index names a file, a read-only directory...
            if err.errno == errno.EROFS and not os.path.lexists(path):  # the file system answers before the file
                continue
            logger.warning('cannot remove the stale local file %s: %s', path, err)
            raise StreamingError(f'Cannot remove {path}, a local file the remote index no longer vouches for '
                                 f'({type(err).__name__}: {err}); it must not be served. Remove it by hand or use '
                                 f'another `local`.') from err
    return removed


