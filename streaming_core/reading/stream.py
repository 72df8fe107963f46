"""A :class:`Stream`: one source of samples (a remote and/or local directory with an ``index.json``).

Besides its configuration (weights, download settings), a stream owns its local files: it brings the index up to
date with the remote (:mod:`streaming_core.reading.index_sync`: another remote is refused, a changed remote is noticed
and stale local files removed), and prepares a shard (download, hash check, bounded decompression, atomic rename) when
asked. Coordination with other processes on the node uses kernel-released byte-range locks in a lock file kept in
the local directory's state directory (:func:`streaming_core.common.paths.state_dir`), so there is no shared state
that can go stale and nothing of ours inside the local directory.
"""

from __future__ import annotations

import contextvars
import logging
import numbers
import os
from contextlib import AbstractContextManager
from typing import Any, Mapping, Sequence

from streaming_core.common.paths import LOCK_NAME, default_local, state_dir
from streaming_core.errors import (
    DatasetVersionError,
    HashMismatchError,
    IndexFormatError,
    RemoteNotFoundError,
    ShardCorruptError,
    StorageError,
    StreamingError,
    TruncatedDownloadError,
)
from streaming_core.reading.binary_index import BinaryIndexError, binary_path, load_or_build, open_binary
from streaming_core.reading.cache_record import is_in_place, same_version
from streaming_core.reading.format_options import apply_format_options, merge_format_options
from streaming_core.reading.index_file import INDEX_BASENAME, resolve_inside
from streaming_core.reading.index_sync import MissingIndexError, sync_index
from streaming_core.reading.inplace_copies import copies_current, copy_is_current, decompress_beside
from streaming_core.reading.listing_watch import listing_check, remember_version
from streaming_core.reading.local_only import sync_local_only
from streaming_core.reading.remote_watch import changed_now, expected_hash_after_change, fast_hash
from streaming_core.reading.shard_table import ShardTable
from streaming_core.reading.temp_sweep import FOREIGN_TEMP_AGE, remove_dead_temp_files, sweep_local_dir
from streaming_core.reading.version_guard import installing, purge_count
from streaming_core.storage.facade import check_places, download_file, is_remote, join, local_path, pinned_location
from streaming_core.storage.locking import RangeLocks
from streaming_core.storage.redact import redact_url

logger = logging.getLogger('streaming_core.reading.stream')

__all__ = ['Stream', 'MissingIndexError', 'StreamDefaults', 'remove_dead_temp_files', 'FOREIGN_TEMP_AGE',
           'merge_format_options']


StreamDefaults = Mapping[str, Any]

#: While :meth:`Stream.prepare_files` works on one part of a shard: the reader, its raw file info and its
#: compressed file info (what :meth:`Stream._download_file` and :meth:`Stream._decompress_shard_part` check against,
#: so overrides keep the reference's signatures).
_PART: contextvars.ContextVar[tuple[Any, Any, Any] | None] = contextvars.ContextVar('streaming_core_part', default=None)


def _plain(value: Any) -> Any:
    """A number as a Python ``int`` or ``float`` (a numpy scalar is converted; ``None`` stays)."""
    if value is None or isinstance(value, (int, float)):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _check_validate_hash_name(name: str) -> None:
    """Refuse an unknown ``validate_hash``, naming the argument."""
    from streaming_core.errors import UnknownNameError
    from streaming_core.storage.hashing import get_hash
    try:
        get_hash(name)
    except UnknownNameError as err:
        raise type(err)(f'validate_hash={name!r}: {err}') from None


class Stream:
    """One source of samples, optionally weighted against other streams.

    Args:
        remote: Where the dataset lives (``s3://...``, ``gs://...``, ``https://...``, a local path...). ``None``
            when the data is only local.
        local: The local directory the shards are read from (and downloaded to). Defaults to a directory under the
            cache root derived from ``remote`` (see :func:`streaming_core.common.paths.default_local`); it may be
            shared by any number of jobs.
        split: A subdirectory of both ``remote`` and ``local``.
        proportion: Relative weight of this stream (all streams must then have one).
        repeat: How many times to repeat this stream's samples per epoch (may be fractional).
        choose: How many of this stream's samples to take per epoch.
        download_retry: Retries after the first download attempt (``0`` means one attempt).
        download_timeout: Per-request timeout in seconds, also the bound of every wait for another process.
        validate_hash: A hash name (``'sha1'``, ``'xxh3_64'``...) checked on every downloaded file.
        keep_zip: Keep compressed files after decompressing them.
        storage_options: Options for the remote's storage backend (endpoint, profile, credentials file, ...).
        format: For a directory without ``index.json``: the format that indexes its files (``'parquet'``...);
            default: detected from the files when unambiguous.
        columns: Read only these columns, in this order (``format_options['columns']``).
        format_options: Options of the format's index builder (Parquet: ``columns``, ``split`` (a Hugging Face
            split, not a subdirectory), ``config``, ``data_files``, ``decode_images``), part of the derived index's
            identity; or, for a streaming ``index.json``, of its shard formats (MDS, JSON, CSV: ``columns``; not
            part of the index's identity, see :mod:`streaming_core.reading.format_options`). One the format lacks,
            or a column the data lacks, raises :class:`~streaming_core.reading.derived_index.FormatOptionError` at
            sync, naming it and the format.

    Attributes:
        index_identity: After :meth:`get_shards`, the identity of the index version this stream loaded (see
            :class:`streaming_core.reading.index_sync.SyncedIndex`); ``None`` before. A stream keeps that one version.
        purges_at_load: The local directory's purge count when the index was loaded (see
            :mod:`streaming_core.reading.version_guard`).
        purge_dir: The state directory that count was read from (under the cache root of that moment).
        read_root: After :meth:`get_shards`, where this stream downloads its files from: its remote, pinned to the
            version of its index where the storage can name one (``hf://…@<commit>/…`` for a branch), so a pickled
            stream reads that version in any process.
    """

    index_identity: str | None = None
    read_root: str | None = None
    purges_at_load: int = 0
    purge_dir: str | None = None
    #: The format's options (see ``format_options``; a subclass that skips ``__init__`` has none).
    format_options: Mapping[str, Any] = {}

    def __init__(self, *, remote: str | None = None, local: str | None = None, split: str | None = None,
                 proportion: float | None = None, repeat: float | None = None, choose: int | None = None,
                 download_retry: int | None = None, download_timeout: float | None = None,
                 validate_hash: str | None = None, keep_zip: bool | None = None,
                 storage_options: Mapping[str, Any] | None = None, format: str | None = None,
                 columns: Sequence[str] | None = None, format_options: Mapping[str, Any] | None = None) -> None:
        if format is not None and (not isinstance(format, str) or not format):
            raise ValueError(f'`format` must be a format name such as "parquet", got {format!r}.')
        self.format = format
        self.format_options = merge_format_options(format_options, columns, type(self).__name__)
        given = [name for name, value in (('proportion', proportion), ('repeat', repeat), ('choose', choose))
                 if value is not None]
        if len(given) > 1:
            raise ValueError(f'At most one of `proportion`, `repeat`, and `choose` may be specified; the others are '
                             f'derived. Got {given}.')
        for name in given:
            value = locals()[name]
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < 0:
                raise ValueError(f'`{name}` must be a non-negative number, got {value!r}.')
        if choose is not None and int(choose) != choose:
            raise ValueError(f'`choose` must be an integer number of samples, got {choose!r}.')
        if download_retry is not None and (isinstance(download_retry, bool)
                                           or not isinstance(download_retry, numbers.Integral) or download_retry < 0):
            raise ValueError(f'`download_retry` must be a non-negative integer, got {download_retry!r}.')
        timeout_ok = isinstance(download_timeout, numbers.Real) and not isinstance(download_timeout, bool)
        if download_timeout is not None and not (timeout_ok and download_timeout > 0):
            raise ValueError(f'`download_timeout` must be a positive number of seconds, got {download_timeout!r}.')
        if remote is not None and not isinstance(remote, str):
            raise TypeError(f'`remote` must be a string, got {type(remote).__name__}.')
        if local is not None and not isinstance(local, str):
            raise TypeError(f'`local` must be a string path, got {type(local).__name__}.')
        if local is not None and is_remote(local):
            raise ValueError(f'`local` must be a local directory, got the URL {local!r}. Put URLs in `remote`.')
        check_places(remote, local)
        self.remote = remote.rstrip('/') if remote else None
        self._local_arg = local_path(local) if local else None
        self._split = split or None
        self.proportion = _plain(proportion)  # numpy scalars (accepted as numbers) become Python numbers
        self.repeat = _plain(repeat)
        self.choose = int(choose) if choose is not None else None
        self.download_retry = int(download_retry) if download_retry is not None else None
        self.download_timeout = float(download_timeout) if download_timeout is not None else None
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip
        self.storage_options = dict(storage_options or {})
        if validate_hash is not None:
            _check_validate_hash_name(validate_hash)

    @property
    def split(self) -> str:
        """The split: a subdirectory of ``remote`` and ``local``, ``''`` for none (as in the reference, whose users
        write ``os.path.join(self.local, self.split, ...)`` in their subclasses)."""
        return self.__dict__.get('_split') or ''

    @split.setter
    def split(self, value: str | None) -> None:
        self._split = value or None

    # ----------------------------------------------------------------------------------------------------------
    def apply_default(self, defaults: StreamDefaults) -> None:
        """Fill unset settings from the dataset's defaults."""
        if not self.remote and not self._local_arg:
            raise ValueError('`remote` and/or `local` path must be provided.')
        if self._split is None:
            self._split = defaults.get('split') or None
        if self.format is None:
            self.format = defaults.get('format')
        if defaults.get('format_options'):  # the dataset's options, under the stream's own
            self.format_options = {**merge_format_options(defaults['format_options'], None, 'StreamingDataset'),
                                   **self.format_options}
        for name in ('download_retry', 'download_timeout', 'validate_hash', 'keep_zip'):
            if getattr(self, name) is None:
                setattr(self, name, defaults.get(name))
        if not self.storage_options and defaults.get('storage_options'):
            self.storage_options = dict(defaults['storage_options'])
        if self.download_retry is None:
            self.download_retry = 2
        if self.download_timeout is None:
            self.download_timeout = 60.0
        if self.keep_zip is None:
            self.keep_zip = False
        if self.validate_hash is not None:
            _check_validate_hash_name(self.validate_hash)

    @property
    def columns(self) -> list[str] | None:
        """The projected columns (``format_options['columns']``; ``None``: all)."""
        columns = self.format_options.get('columns')
        return list(columns) if columns is not None else None

    @property
    def local(self) -> str:
        """The local root (without the split)."""
        return self._local_arg or default_local(self.remote or '')

    @property
    def local_dir(self) -> str:
        """The local directory of this split."""
        return os.path.join(self.local, self.split) if self.split else self.local

    @property
    def remote_dir(self) -> str | None:
        """The remote location of this split."""
        if not self.remote:
            return None
        return join(self.remote, self.split) if self.split else self.remote

    @property
    def has_remote_copy(self) -> bool:
        """Whether this stream's data exists somewhere other than its local directory (so it may be evicted)."""
        remote = self.remote_dir
        return bool(remote) and not is_in_place(remote, self.local_dir)  # a bind mount of it too: in place

    @property
    def safe_keep_zip(self) -> bool:
        """Keep compressed files: asked for, or the data has no other copy."""
        return bool(self.keep_zip) or not self.has_remote_copy

    def _locks(self) -> RangeLocks:
        local_dir = self.local_dir
        cached = self.__dict__.get('_lock_path')
        if cached is None or cached[0] != local_dir:
            cached = (local_dir, os.path.join(state_dir(local_dir), LOCK_NAME))
            self._lock_path = cached
        return RangeLocks.for_path(cached[1])

    @property
    def wait_timeout(self) -> float:
        """How long to wait for another process's download of one file before giving up."""
        attempts = int(self.download_retry or 0) + 1
        return float(self.download_timeout or 60.0) * attempts + 30.0 * attempts

    # ----------------------------------------------------------------------------------------------------------
    def index_path(self) -> str:
        """The local path of this stream's ``index.json``."""
        return os.path.join(self.local_dir, INDEX_BASENAME)

    def fetch_index(self) -> str:
        """Bring the local ``index.json`` up to date with the remote (one check per process, one download per node
        when it changed; see :mod:`streaming_core.reading.index_sync`) and return its path."""
        return self._sync_index().path

    def get_shards(self, world: Any = None, allow_unsafe_types: bool = False) -> list[Any]:
        """Like :meth:`shard_table`, but with every shard's reader created now (one object per shard: prefer
        :meth:`shard_table` for big indexes).

        A subclass may override it (the reference's signature ``get_shards(world, allow_unsafe_types)``): the
        dataset then calls it, by keyword, instead of :meth:`shard_table`, and reads the readers it returns.

        Args:
            world: The :class:`~streaming_core.World` of the process building the dataset (unused here; the
                reference's argument). A bool in its place is taken as ``allow_unsafe_types`` (the old signature).
            allow_unsafe_types: Allow ``pkl`` columns.
        """
        if isinstance(world, bool):
            world, allow_unsafe_types = None, world
        return list(self.shard_table(allow_unsafe_types))

    def overrides_get_shards(self) -> bool:
        """Whether this stream's class overrides :meth:`get_shards` (the dataset then loads its shards through it)."""
        return type(self).get_shards is not Stream.get_shards

    def shard_table(self, allow_unsafe_types: bool = False,
                    expect: tuple[str, str] | None = None) -> ShardTable:
        """Bring the index up to date and map its binary form (built once per node; see
        :mod:`streaming_core.reading.binary_index`): per-shard arrays, readers created on first touch. Clears temporary
        files of dead processes. Sets :attr:`index_identity` to the version loaded.

        Args:
            allow_unsafe_types: Allow ``pkl`` columns.
            expect: ``(identity, layout)`` of the version a pickled dataset holds: its binary index is mapped when
                present; otherwise the index is synced and rebuilt, and must be that version (or, on another
                machine, have the same layout).

        Raises:
            CacheRemoteMismatchError: the local directory holds another remote's data.
            IndexFormatError: the index is invalid (naming the local copy, and the remote when there is one), or
                is not the version ``expect`` names.
            ValueError: ``validate_hash`` names a hash the index does not record for the files to download.
        """
        if expect is not None:
            path = binary_path(state_dir(self.local_dir), expect[0])
            try:
                header, arrays, mapping = open_binary(path, expect[0])
                remember_version(self)  # an unpickled dataset (a spawned worker): its listing's record, read at once
                return apply_format_options(self, ShardTable(self, path, header, arrays, mapping, allow_unsafe_types))
            except BinaryIndexError:
                pass
        synced = self._sync_index()
        self.purge_dir = state_dir(self.local_dir)
        self.purges_at_load = synced.purges if synced.purges is not None else purge_count(self.purge_dir)
        remove_dead_temp_files(self.purge_dir)
        try:
            table = load_or_build(self, synced, allow_unsafe_types, self.wait_timeout)
        except IndexFormatError as err:
            if self.remote_dir and hasattr(err, 'add_note'):
                err.add_note(f'{synced.path} is the local copy of {redact_url(join(self.remote_dir, INDEX_BASENAME))}'
                             f' (compared with it at construction).')
            raise err
        self._sweep_temp_files(table)
        if expect is not None:
            # Another machine has its own stat of a local index (the layout must match); a remote's version named
            # the same way on both sides (its stat: etag..., or a listing of its files with their etags) is the same
            # everywhere, so it must match itself: a rewrite with the same names and counts (Parquet files, MDS
            # without hashes) is another version. (A digest of the bytes on one side, its stat on the other: layout.)
            kinds = {identity.split(':', 1)[0] for identity in (table.identity, expect[0])}
            strict = self.remote_dir is not None and is_remote(self.remote_dir) and kinds in ({'stat'}, {'derived'})
            if not same_version(table.identity, expect[0]) and (strict or table.layout != expect[1]):
                what = 'with other shards' if table.layout != expect[1] else 'the same shard names and counts'
                raise IndexFormatError(
                    f'{synced.path} of {self!r} changed since this dataset was created (index {expect[0]!r}, now '
                    f'{table.identity!r}, {what}): a dataset keeps one index version for its lifetime. '
                    f'Create the dataset again to read the new version.')
            remember_version(self)  # an unpickled dataset (a spawned worker): its listing's record, read at once
            return apply_format_options(self, table)
        self._check_validate_hash(table)
        table = apply_format_options(self, table)  # a streaming index.json's formats take them (a projection...)
        self.index_identity = synced.identity
        remember_version(self)  # its listing's entries and prints, for this process and its forks
        if self.has_remote_copy:  # files are read at the version of the index, in any process (a branch's commit)
            try:
                self.read_root = pinned_location(self.remote_dir, timeout=float(self.download_timeout),
                                                 options=self.storage_options)
            except (StorageError, OSError) as err:  # offline (a local copy read as it is): downloads will say so
                logger.debug('cannot pin %s to its version: %s', redact_url(self.remote_dir), err)
        return table

    def _sync_index(self) -> Any:
        """The index version to load: synced with the remote, or the local directory's own."""
        if self.remote_dir:
            return sync_index(self)
        return sync_local_only(self, self.index_path())

    def _sweep_temp_files(self, table: ShardTable) -> None:
        """Remove temporary files of dead processes from the local directory (:func:`sweep_local_dir`): only where
        readers write (downloads from a remote, decompressed copies of compressed shards), not in a directory of
        plain shards read in place (the user's files)."""
        if (not self.remote_dir or is_in_place(self.remote_dir, self.local_dir)) and not table.has_compressed_files:
            return
        sweep_local_dir(self.local_dir)

    def _check_validate_hash(self, table: ShardTable) -> None:
        """Refuse a ``validate_hash`` the index does not record for a file this stream may download."""
        if not self.validate_hash or not self.remote_dir:
            return
        for basename, recorded in table.hash_algorithms():
            if self.validate_hash not in recorded:
                raise ValueError(
                    f'Hash algorithm `{self.validate_hash}` chosen for data validation is not recorded in the '
                    f'index of {self!r} (file {basename} records {sorted(recorded) or "no hashes"}). Provide one of '
                    f'those as `validate_hash`, or none.')

    # ----------------------------------------------------------------------------------------------------------
    def raw_paths(self, reader: Any) -> list[str]:
        """The local paths of a shard's raw files, checked to stay inside the local directory (the shard manager
        keeps them per shard)."""
        return [resolve_inside(self.local_dir, raw.basename, reader.where) for raw, _ in reader.parts]

    def is_ready(self, reader: Any) -> bool:
        """Whether every raw file of the shard is present locally (and, read in place, each decompressed copy is
        still the one recorded with its compressed file: :mod:`~streaming_core.reading.inplace_copies`)."""
        paths = self.raw_paths(reader)
        return all(os.path.isfile(path) for path in paths) and copies_current(self, reader, paths)

    def present_bytes(self, reader: Any) -> int:
        """The bytes this shard occupies locally now (raw and compressed files)."""
        return self.present_bytes_of([info.basename for part in reader.parts for info in part if info is not None])

    def present_bytes_of(self, basenames: list[str]) -> int:
        """The bytes these files of the local directory occupy now (absent ones count 0)."""
        total = 0
        for basename in basenames:
            try:
                total += os.path.getsize(os.path.join(self.local_dir, *basename.split('/')))
            except OSError:
                pass
        return total

    def locks(self) -> RangeLocks:
        """This stream's node-local locks (a file in its local directory's state directory, under the cache root)."""
        return self._locks()

    def prepare_shard(self, shard: Any) -> int:
        """Make a shard's raw files present (the engine calls this; a subclass may override it, as in the
        reference) and return the change of the bytes it occupies locally. Calls :meth:`prepare_files`.

        Args:
            shard: The shard's reader (one of :meth:`get_shards`).
        """
        before = self.present_bytes(shard)
        self.prepare_files(shard)
        return self.present_bytes(shard) - before

    def prepare_files(self, reader: Any) -> None:
        """Make the shard's raw files present: download, check, decompress (bounded), rename into place. The caller
        holds the shard's "prepare" lock, so at most one process per node works on it. Downloads go through
        :meth:`_download_file` and decompression through :meth:`_decompress_shard_part` (both overridable)."""
        for raw, zipped in reader.parts:
            token = _PART.set((reader, raw, zipped))
            try:
                self._prepare_part(reader, raw, zipped)
            finally:
                _PART.reset(token)

    def _prepare_part(self, reader: Any, raw: Any, zipped: Any) -> None:
        raw_path = resolve_inside(self.local_dir, raw.basename, reader.where)
        if os.path.isfile(raw_path) and (zipped is None or self.has_remote_copy or copy_is_current(
                self.local_dir, raw.basename, raw_path, os.path.join(self.local_dir, *zipped.basename.split('/')))):
            if zipped is not None and not self.safe_keep_zip:
                zip_path = os.path.join(self.local_dir, *zipped.basename.split('/'))
                try:  # another process of the node may remove it at the same moment
                    os.remove(zip_path)
                except FileNotFoundError:
                    pass
            return
        os.makedirs(os.path.dirname(raw_path), exist_ok=True)
        if zipped is None:
            self._download_file(raw.basename)
            self._check_present(raw_path, raw.basename, '_download_file')
            return
        zip_path = resolve_inside(self.local_dir, zipped.basename, reader.where)
        if not os.path.isfile(zip_path):
            self._download_file(zipped.basename)
            self._check_present(zip_path, zipped.basename, '_download_file')
        if self.has_remote_copy:
            self._decompress_shard_part(zipped, zip_path, raw_path, reader.compression)
        else:  # recorded with the compressed file it was made from (see inplace_copies)
            decompress_beside(self, reader, raw, zipped, raw_path, zip_path)
        self._check_present(raw_path, raw.basename, '_decompress_shard_part')
        if not self.safe_keep_zip and os.path.exists(zip_path):
            os.remove(zip_path)

    def _check_present(self, path: str, basename: str, method: str) -> None:
        """After an overridable step: the file is there and, when a subclass's ``_download_file`` fetched it, has
        the size (and ``validate_hash``) the index records (the base class checks while downloading)."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{type(self).__name__}.{method} returned without putting {basename} at {path}.')
        if method != '_download_file' or type(self)._download_file is Stream._download_file:
            return
        part = _PART.get()
        info = next((item for item in (part or ())[1:] if item is not None and item.basename == basename), None)
        if info is None:
            return
        size = os.path.getsize(path)
        if size != info.bytes:
            os.remove(path)
            raise ShardCorruptError(f'{type(self).__name__}._download_file put {size} bytes at {path}, but the '
                                    f'index declares {info.bytes} for {basename}.')
        if self.validate_hash and self.validate_hash in info.hashes:
            from streaming_core.storage.hashing import hash_file
            got = hash_file(self.validate_hash, path)
            if got != info.hashes[self.validate_hash]:
                os.remove(path)
                raise HashMismatchError(f'Checksum failure: {path} ({self.validate_hash} is {got}, the index '
                                        f'records {info.hashes[self.validate_hash]}), put there by '
                                        f'{type(self).__name__}._download_file.')

    def _download_file(self, from_basename: str, to_basename: str | None = None) -> str:
        """Download one file of this stream's remote into its local directory and return the local path (the
        reference's signature; a subclass may override it, for example to fetch from a mirror).

        While a shard is prepared, the size and the ``validate_hash`` recorded in the index are checked (with
        retries); called directly for another file, it is downloaded unchecked.

        Args:
            from_basename: The file's path relative to the remote (and split).
            to_basename: Its path relative to the local directory (default: the same).
        """
        part = _PART.get()
        where = part[0].where if part is not None else self.local_dir
        path = resolve_inside(self.local_dir, to_basename or from_basename, where)
        info = None
        if part is not None:
            info = next((item for item in part[1:] if item is not None and item.basename == from_basename), None)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._download(info, path, from_basename)
        return path

    def _decompress_shard_part(self, zip_info: Any, zip_filename: str, raw_filename: str,
                               compression: str | None) -> None:
        """Decompress one compressed shard file into its raw file (the reference's signature; overridable). Called
        by :meth:`prepare_files`, the output is bounded by the raw size the index declares and must have exactly
        that size; called from elsewhere (a subclass's own ``prepare_shard``), it is not bounded."""
        part = _PART.get()
        self._decompress(compression, zip_filename, raw_filename, part[1] if part is not None else None)

    def _download(self, info: Any, path: str, basename: str) -> None:
        remote = self.remote_dir
        if not remote:
            raise MissingIndexError(f'Shard file {path} is missing locally and the stream has no remote to fetch '
                                    f'it from.')
        remote = self.read_root or remote
        if info is None:
            download_file(join(remote, basename), path, timeout=float(self.download_timeout),
                          retries=int(self.download_retry), options=self.storage_options,
                          before_rename=listing_check(self, basename), guard=self._installing)
            return
        expected_hash = None
        if self.validate_hash:
            if self.validate_hash not in info.hashes:
                raise ValueError(f'Hash algorithm `{self.validate_hash}` chosen for data validation does not match '
                                 f'with those provided during dataset creation `{sorted(info.hashes)}`. Provide one '
                                 f'of those.')
            expected_hash = (self.validate_hash, info.hashes[self.validate_hash])
        since_change = expected_hash_after_change(self, info, basename)  # see remote_watch
        listed = listing_check(self, basename)  # see listing_watch

        def rewritten() -> None:
            """The file is gone, larger than the index says, or (after the retries) shorter or of another hash: a
            rewrite of the dataset stops the job, saying so."""
            if expected_hash is None and changed_now(self) is not None:
                raise DatasetVersionError(
                    f'The data of {self!r} changed while this job read it: {redact_url(remote)}/index.json is now '
                    f'{self._remote_index_now} (this job reads {self.index_identity}), and {basename} is no longer '
                    f'the file this job\'s index describes (it is gone, or its size or hash differs). Restart the job '
                    f'to read the new version; write new versions of a dataset to new directories.')

        try:
            download_file(join(remote, basename), path, timeout=float(self.download_timeout),
                          retries=int(self.download_retry), expected_size=info.bytes,
                          expected_hash=expected_hash or since_change or fast_hash(info), options=self.storage_options,
                          before_rename=listed, guard=self._installing, on_mismatch=rewritten)
        except (TruncatedDownloadError, RemoteNotFoundError) as err:
            if listed is not None:  # another size, or gone: a listed file replaced or removed is a new version
                listed(path)
            if isinstance(err, TruncatedDownloadError):  # a gone file was checked at once (on_mismatch)
                rewritten()
            raise
        except HashMismatchError:
            rewritten()
            raise

    def _decompress(self, compression: str | None, zip_path: str, raw_path: str, raw: Any) -> None:
        """Decompress ``zip_path`` into ``raw_path``, bounded by the raw size the index declares."""
        from streaming_core.storage.compression import decompress_part
        decompress_part(compression, zip_path, raw_path, raw, guard=self._installing)

    def _installing(self) -> AbstractContextManager[None]:
        """Held while a file this stream fetched or decompressed is renamed into its local directory (see
        :func:`~streaming_core.reading.version_guard.installing`)."""
        return installing(self)

    def remove_shard_files(self, reader: Any) -> int:
        """Delete the shard's local files (raw and compressed); returns the bytes freed. Never called for a stream
        without a remote copy."""
        if not self.has_remote_copy:
            raise StreamingError(f'Refusing to delete {reader.where}: its stream has no remote copy.')
        freed = 0
        for raw, zipped in reader.parts:
            for info in (raw, zipped):
                if info is None:
                    continue
                path = os.path.join(self.local_dir, *info.basename.split('/'))
                try:
                    size = os.path.getsize(path)
                    os.remove(path)
                    freed += size
                except FileNotFoundError:
                    pass
        return freed

    def __repr__(self) -> str:
        remote = redact_url(self.remote) if self.remote else None
        options = f', format_options={self.format_options!r}' if self.format_options else ''
        return f'Stream(remote={remote!r}, local={self.local!r}, split={self.split!r}{options})'

