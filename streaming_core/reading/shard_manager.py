"""Per-process access to a dataset's shards: preparing them (once per node), pinning and opening them.

A :class:`ShardManager` knows every shard of every stream (global shard ids in stream order). In each process
it keeps the open shard views (memory-mapped), holds a shared "in use" lock on each open shard of an evictable
stream (so no process evicts a shard another is reading), and de-duplicates concurrent preparations of the same
shard between its own threads; the stream's "prepare" lock de-duplicates them between processes.

Files already present locally (a cache, a local dataset, the decompressed copies written next to compressed files)
are checked once per process, when a shard is first opened: each raw file's size against the index always, and
its hash when the stream's ``validate_hash`` names one the index records for the raw data. The per-sample path
never repeats the check.

Units that share a file (a Parquet file's row groups, see :mod:`streaming_core.reading.catalogue`) are opened as
views of their own, but everything about the file is keyed on the first unit naming it (:meth:`ShardManager.file_of`):
its preparation (downloaded once per node), its local check, its "in use" and "prepare" lock bytes (each open view
of any of its units holds a shared reference on the file's "in use" byte), its cache accounting and its eviction
(which needs every unit of the file unpinned, and makes all of them not ready).

A process keeps at most :func:`open_view_cap` views open (each holds a file descriptor and a memory map, and both are
limited per process: ``ulimit -n``, often 1024, and ``vm.max_map_count``). Past it, opening a view closes the views
opened longest ago, held ones included (an iterator holds every shard of a shuffled epoch until its last use) unless
they are pinned against eviction: a closed view is opened again when it is next read.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import (
    CacheLimitError,
    DatasetVersionError,
    HashMismatchError,
    ShardCorruptError,
    StreamingError,
)
from streaming_core.machinery.protocols import ShardReader, ShardView
from streaming_core.reading.cache_record import stat_identity
from streaming_core.reading.catalogue import ShardCatalogue
from streaming_core.reading.inplace_copies import copies_current
from streaming_core.reading.listing_watch import check_in_place
from streaming_core.reading.pin_relief import note_random_access, release_at_collection
from streaming_core.reading.shard_table import ShardTable
from streaming_core.reading.stream import Stream
from streaming_core.reading.version_guard import check_still_current
from streaming_core.storage.locking import RangeLocks
from streaming_core.storage.redact import redact_url

if TYPE_CHECKING:  # imported with the first cache limit: datasets without one never load it
    from streaming_core.reading.cache_limit import CacheState

__all__ = ['ShardManager', 'ShardPrepareError', 'ShardHashMismatchError', 'ShardCorruptPrepareError', 'prepare_error',
           'open_view_cap']

logger = logging.getLogger('streaming_core.reading.shard_manager')


def open_view_cap() -> int:
    """How many shard views a process keeps open: half its soft ``RLIMIT_NOFILE`` (the rest for everything else:
    sockets, DataLoader queues, shared-memory tensors) and a quarter of ``vm.max_map_count``, at least 64."""
    files = 1024
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        files = 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)
    except (ImportError, OSError, ValueError):
        pass
    maps = 65530
    try:
        with open('/proc/sys/vm/max_map_count') as handle:
            maps = int(handle.read().strip())
    except (OSError, ValueError):
        pass
    return max(64, min(files // 2, maps // 4))


class ShardPrepareError(StreamingError, OSError):
    """A shard could not be made available (download, hash check or decompression failed)."""


class ShardHashMismatchError(ShardPrepareError, HashMismatchError):
    """A shard could not be made available because a downloaded file failed its hash check (a ``ValueError`` as
    well, as the reference's "Checksum failure")."""


class ShardCorruptPrepareError(ShardPrepareError, ShardCorruptError):
    """A shard could not be made available because a downloaded or local file is corrupt (a bad compressed file,
    one that decompresses to another size): both a :class:`ShardPrepareError` and a ``ShardCorruptError``."""


def prepare_error(message: str, cause: BaseException) -> ShardPrepareError:
    """The :class:`ShardPrepareError` for a failed preparation, of the subclass that keeps the type family the
    reference raises for ``cause`` (a hash mismatch stays a ``ValueError``)."""
    if isinstance(cause, HashMismatchError):
        return ShardHashMismatchError(message)
    if isinstance(cause, ShardCorruptError):
        return ShardCorruptPrepareError(message)
    return ShardPrepareError(message)


class ShardManager:
    """Every shard of a dataset, with per-process open views and node-wide coordination.

    Args:
        catalogue: The dataset's shard catalogue (streams, readers, and which stream each shard belongs to).
        cache_limit: The node-wide cache limit in bytes, or None.
        max_open: How many shard views a process keeps open for random access.
    """

    def __init__(self, catalogue: ShardCatalogue, cache_limit: int | None, max_open: int = 64) -> None:
        self.catalogue = catalogue
        self.streams = catalogue.streams
        self.cache_limit = cache_limit
        self.max_open = max_open
        self._stream_evictable = [stream.has_remote_copy and cache_limit is not None for stream in self.streams]
        parts = []
        for index, stream in enumerate(self.streams):
            parts.append(os.path.realpath(stream.local_dir))
            parts.append(str(getattr(stream, 'index_identity', None)))  # a refreshed index starts a new account
            parts.append(catalogue.stream_layout(index))
        from streaming_core.reading.cache_limit import cache_key
        self.key = cache_key(parts)
        self._init_process_state()

    # The catalogue's tables (properties, so a pickled manager carries none of them).
    @property
    def readers(self) -> Sequence[ShardReader]:
        """Every shard's reader (created on first touch)."""
        return self.catalogue.readers

    @property
    def stream_per_shard(self) -> NDArray[np.int64]:
        """The stream of each shard."""
        return self.catalogue.stream_per_shard

    @property
    def local_index(self) -> NDArray[np.int64]:
        """Each shard's position within its stream."""
        return self.catalogue.shard_in_stream

    def file_of(self, shard: int) -> int:
        """The unit the shard's file is prepared, locked, counted and evicted under: the first unit naming the same
        file (the shard itself when its format has one file per unit)."""
        return int(self.catalogue.file_of_shard[shard])

    # ----------------------------------------------------------------------------------------------------------
    def _init_process_state(self) -> None:
        self._pid = os.getpid()
        self._views: dict[int, ShardView] = {}  # in the order they were opened (the oldest closed first past the cap)
        self._view_cap = open_view_cap()
        self._cold: dict[int, None] = {}  # shards touched once by random access (insertion-ordered, bounded)
        self._holds: dict[int, int] = {}  # shard -> iterators of this process reading it (never trimmed)
        self._views_lock = threading.RLock()
        self._inflight: dict[int, Future[None]] = {}
        self._inflight_lock = threading.Lock()
        self._short_of_room: set[int] = set()  # files whose preparing thread waits (for cache room, or another process)
        self._cache: CacheState | None = None
        self._checked: set[int] = set()  # files (by first unit) this process has checked against the index
        self._paths: dict[int, list[str]] = {}  # shard -> local paths of its raw files (checked inside the directory)
        self._pinned: dict[int, tuple[RangeLocks, int]] = {}  # shard -> the "in use" lock its open view holds
        self._release_at_collection = release_at_collection(self, self._pinned)
        #: Random accesses so far (a watcher tells activity from idleness by it), and the thread that gives the
        #: views random access keeps pinned up when idle (:mod:`~streaming_core.reading.pin_relief`).
        self.random_reads = 0
        self.relief_thread: threading.Thread | None = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in ('_views', '_cold', '_holds', '_views_lock', '_inflight', '_inflight_lock', '_short_of_room',
                     '_cache', '_pid', '_checked', '_paths', '_view_cap', '_pinned', '_release_at_collection',
                     'random_reads', 'relief_thread'):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_process_state()

    def adopt_process(self) -> None:
        """In a forked process (a DataLoader worker): drop the parent's views, locks and threads, once."""
        self._check_pid()

    @property
    def views_lock(self) -> threading.RLock:
        """The lock guarding this process's views and holds."""
        return self._views_lock

    def unheld_views(self) -> list[int]:
        """The shards whose views are open but held by no iterator (random access's; call under :attr:`views_lock`)."""
        return [shard for shard in self._views if shard not in self._holds]

    @property
    def open_views(self) -> dict[int, ShardView]:
        """This process's open shard views by shard id (read-only for callers: the hot loop looks views up here)."""
        return self._views

    def _check_pid(self) -> None:
        if self._pid != os.getpid():  # forked: views, locks and threads belong to the parent
            self._init_process_state()

    @property
    def cache(self) -> CacheState | None:
        """The node-wide cache state (only with a cache limit)."""
        self._check_pid()
        if self.cache_limit is None:
            return None
        if self._cache is None:
            from streaming_core.reading.cache_limit import CacheHooks, CacheState
            hooks = CacheHooks(scan=self._scan, evictable=self.evictable, try_lock_exclusive=self._try_lock_exclusive,
                               unlock=self._unlock_exclusive, remove=self._remove)
            timeout = max(s.wait_timeout for s in self.streams)
            self._cache = CacheState(self.key, len(self.readers), self.cache_limit, hooks, timeout=timeout)
        return self._cache

    # ----------------------------------------------------------------------------------------------------------
    # Locks: byte 1 + 2*i is shard i's "in use" lock, byte 2 + 2*i its "prepare" lock (per stream file); a unit
    # that shares its file with earlier units uses the bytes of the file's first unit.
    def _locks(self, shard: int) -> RangeLocks:
        return self.streams[int(self.stream_per_shard[shard])].locks()

    def _use_byte(self, shard: int) -> int:
        return 1 + 2 * int(self.local_index[self.catalogue.file_of_shard[shard]])

    def _prepare_byte(self, shard: int) -> int:
        return 2 + 2 * int(self.local_index[self.catalogue.file_of_shard[shard]])

    def evictable(self, shard: int) -> bool:
        """Whether the shard may ever be evicted (a cache limit is set and its stream has a remote copy)."""
        return self._stream_evictable[int(self.stream_per_shard[shard])]

    def _try_lock_exclusive(self, shard: int) -> bool:
        locks = self._locks(shard)
        if not locks.try_acquire(self._use_byte(shard), True):
            return False
        if not locks.try_acquire(self._prepare_byte(shard), True):
            locks.release(self._use_byte(shard))
            return False
        return True

    def _unlock_exclusive(self, shard: int) -> None:
        locks = self._locks(shard)
        locks.release(self._prepare_byte(shard))
        locks.release(self._use_byte(shard))

    def _scan(self, shard: int) -> int:
        if self.file_of(shard) != shard:
            return 0  # its file is counted at the file's first unit
        source = self.catalogue.sources[int(self.stream_per_shard[shard])]
        if isinstance(source, ShardTable):  # a scan of every shard creates no reader
            return self.stream_of(shard).present_bytes_of(source.file_names(int(self.local_index[shard])))
        return self.stream_of(shard).present_bytes(self.readers[shard])

    def present_bytes(self) -> int:
        """The bytes of every shard file present in the local directories now (each shared file once)."""
        return sum(self._scan(shard) for shard in range(len(self.readers)))

    def _remove(self, shard: int) -> int:
        if not self.evictable(shard):
            raise StreamingError(f'Refusing to evict {self.readers[shard].where}: it has no remote copy.')
        freed = self.stream_of(shard).remove_shard_files(self.readers[shard])
        logger.debug('evicted shard %d (%d bytes)', shard, freed)
        return freed

    def stream_of(self, shard: int) -> Stream:
        """The stream a shard belongs to."""
        return self.streams[int(self.stream_per_shard[shard])]

    # ----------------------------------------------------------------------------------------------------------
    def is_ready(self, shard: int) -> bool:
        """Whether the shard's raw files are present locally (decompressed copies read in place: current, checked
        until the files are checked, once per process)."""
        paths = self.raw_paths(shard)
        return all(os.path.isfile(path) for path in paths) and (
            self.file_of(shard) in self._checked or copies_current(self.stream_of(shard), self.readers[shard], paths))

    def raw_paths(self, shard: int) -> list[str]:
        """The local paths of the shard's raw files (checked once per process to stay inside the local directory)."""
        paths = self._paths.get(shard)
        if paths is None:
            paths = self._paths[shard] = self.stream_of(shard).raw_paths(self.readers[shard])
        return paths

    def prepare(self, shard: int, on_wait: Callable[[], None] | None = None, patience: float | None = None) -> None:
        """Make the shard's raw files present, once per node (waits for another thread or process doing it).

        ``on_wait`` is called whenever the cache has no room yet for the shard, and ``patience`` bounds that wait
        (see ``CacheState.reserve``).

        Raises:
            ShardPrepareError: naming the shard, its remote and the cause, when it cannot be made available.
        """
        self._check_pid()
        key = self.file_of(shard)  # units of one file share its preparation
        while True:
            with self._inflight_lock:
                future = self._inflight.get(key)
                owner = future is None
                if owner:
                    future = Future()
                    future.patience = patience  # type: ignore[attr-defined]
                    self._inflight[key] = future
            if owner:
                break
            try:
                self._await(future, key, on_wait, self.stream_of(shard).wait_timeout * 2)
                return
            except CacheLimitError:
                # The owner (a prefetch thread) gave up waiting for room sooner than this caller would: this
                # caller prepares the file itself, with its own patience, instead of failing with the owner's error.
                owner_patience = getattr(future, 'patience', None)
                if owner_patience is None or (patience is not None and patience <= owner_patience):
                    raise

        def short_of_room() -> None:
            self._short_of_room.add(key)
            if on_wait is not None:
                on_wait()
        try:
            self._prepare(shard, short_of_room, patience)
        except BaseException as err:
            future.set_exception(err)
            raise
        else:
            future.set_result(None)
        finally:
            self._short_of_room.discard(key)
            with self._inflight_lock:
                self._inflight.pop(key, None)

    def _await(self, future: Future[None], key: int, on_wait: Callable[[], None] | None, timeout: float) -> None:
        """Wait for another thread's preparation of the same file. While that thread waits (for cache room, or for
        another process preparing the file, which may itself wait for room), call ``on_wait`` too: the waiter may
        hold the very pins that keep the room taken (a prefetcher preparing a file while the loop, which needs
        another unit of it, still reads a unit of the file to be evicted)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                future.result(timeout=0.05 if on_wait is not None else max(deadline - time.monotonic(), 0.0))
                return
            except (TimeoutError, FutureTimeoutError):  # one class from Python 3.11 on, two before
                if future.done() or time.monotonic() >= deadline:  # the owner's own error, or no more patience
                    raise
                if on_wait is not None and key in self._short_of_room:
                    on_wait()

    def _prepare(self, shard: int, on_wait: Callable[[], None] | None = None,
                 patience: float | None = None) -> None:
        stream = self.stream_of(shard)
        reader = self.readers[shard]
        if self.is_ready(shard) and (stream.safe_keep_zip or not reader.compression):
            return
        locks = stream.locks()
        byte = self._prepare_byte(shard)
        # The prepare lock is held from before the reservation until the commit: a reservation is live exactly
        # while its holder has this lock (that is how other processes tell a dead reservation from a live one).
        locks.acquire(byte, True, stream.wait_timeout, f'the preparation of {reader.where}', on_wait=on_wait)
        try:
            if self.is_ready(shard):
                stream.prepare_files(reader)  # ready (prepared meanwhile): drops a leftover compressed copy only
                return
            cache = self.cache if self.evictable(shard) else None
            key = self.file_of(shard)  # a file several units share is counted once, under its first unit
            if cache is not None:
                cache.reserve(key, reader.max_size, on_wait=on_wait, timeout=patience)
            try:
                stream.prepare_shard(reader)
                if not reader.compression and type(stream).prepare_shard is Stream.prepare_shard:
                    self._checked.add(key)  # just downloaded: the download checked its size (and hash)
            except BaseException as err:
                if cache is not None:
                    cache.cancel(key)
                if isinstance(err, (KeyboardInterrupt, SystemExit, DatasetVersionError)):
                    raise  # a changed dataset names its stream and both versions itself
                remote = redact_url(stream.remote_dir) if stream.remote_dir else '(no remote)'
                raise prepare_error(f'Cannot prepare shard {shard} ({reader.parts[0][0].basename}) of stream '
                                    f'{remote} into {stream.local_dir}: {type(err).__name__}: {err}', err) from err
            if cache is not None:
                cache.commit(key)
        finally:
            locks.release(byte)

    # ----------------------------------------------------------------------------------------------------------
    def view(self, shard: int) -> ShardView:
        """The open view of a shard (prepared, pinned and memory-mapped on first use)."""
        view = self._views.get(shard)
        if view is not None and self._pid == os.getpid():
            return view
        return self.open(shard)

    def open(self, shard: int, on_wait: Callable[[], None] | None = None) -> ShardView:
        """Prepare (if needed), pin and open a shard (``on_wait``: see :meth:`prepare`)."""
        self._check_pid()
        with self._views_lock:
            view = self._views.get(shard)
            if view is not None:
                return view
        pinned = self._pin(shard)
        try:
            view = self._open_ready(shard, on_wait)
        except BaseException:
            if pinned:
                self._locks(shard).release(self._use_byte(shard))
            raise
        with self._views_lock:
            existing = self._views.get(shard)
            if existing is not None:  # another thread opened it meanwhile
                view.close()
                if pinned:
                    self._locks(shard).release(self._use_byte(shard))
                return existing
            self._views[shard] = view
            if pinned:
                self._pinned[shard] = (self._locks(shard), self._use_byte(shard))
            over = len(self._views) - self._view_cap
            oldest = list(itertools.islice((s for s in self._views if s != shard and self._closable(s)), over)) \
                if over > 0 else []
        for other in oldest:  # reopened when read again; another thread may be reading it now
            self.close(other)
        cache = self.cache if self.evictable(shard) else None
        if cache is not None:
            cache.touch(self.file_of(shard))
        return view

    def _closable(self, shard: int) -> bool:
        """Whether the view cap may close this view: not when an iterator holds it pinned against eviction (its
        file would become evictable; with a cache limit, iterators hold only their keep window's shards)."""
        return shard not in self._holds or not self.evictable(shard)

    def _pin(self, shard: int) -> bool:
        if not self.evictable(shard):
            return False
        self._locks(shard).acquire(self._use_byte(shard), False, self.stream_of(shard).wait_timeout,
                                   f'the "in use" lock of shard {self.file_of(shard)}')
        return True

    def _open_ready(self, shard: int, on_wait: Callable[[], None] | None = None) -> ShardView:
        stream = self.stream_of(shard)
        reader = self.readers[shard]
        last: BaseException | None = None
        for _ in range(3):
            if not self.is_ready(shard):
                self.prepare(shard, on_wait)
            paths = self.raw_paths(shard)
            self._check_current(shard)
            try:
                if self.file_of(shard) not in self._checked:
                    self.check_files(shard, paths)
                view = reader.open(paths)
            except FileNotFoundError as err:  # deleted by hand between the check and the open
                last = err
                continue
            try:  # again: a file rewritten between the check and the open must not be read under this index
                self._check_current(shard, in_place_only=True)
            except BaseException:
                view.close()
                raise
            return view
        raise ShardPrepareError(f'Shard {shard} ({reader.parts[0][0].basename}) kept disappearing from '
                                f'{stream.local_dir} while being opened: {last}') from last

    def _check_current(self, shard: int, in_place_only: bool = False) -> None:
        """Before reading a shard's files: its directory still holds this dataset's index version (one ``stat``);
        ``in_place_only``: only the check of a file read in place against its listing."""
        index = int(self.stream_per_shard[shard])
        source = self.catalogue.sources[index]
        if isinstance(source, ShardTable):
            stream = self.streams[index]
            if not in_place_only:
                check_still_current(stream.local_dir, source.identity, getattr(stream, 'purges_at_load', 0),
                                    stream, getattr(stream, 'purge_dir', None))
            if not stream.has_remote_copy:  # a derived index read in place: its files against its listing
                raw, zipped = self.readers[shard].parts[0]
                listed = (zipped or raw).basename  # the listed file (a .tar.gz, not its decompressed copy)
                check_in_place(stream, listed, os.path.join(stream.local_dir, *listed.split('/')))

    def sample(self, shard: int, index: int) -> Any:
        """Random access to one sample: from the open view if there is one; otherwise, the first time a shard is
        touched, by a one-off positioned read (formats that offer ``read_sample``), and from the second touch on,
        through a view kept open (so sequential access pays the opening once)."""
        view = self._views.get(shard)
        if view is not None and self._pid == os.getpid():
            self.random_reads += 1  # activity, for the pin relief watcher
            return view[index]
        reader = self.readers[shard]
        read_one = getattr(reader, 'read_sample', None)
        cold = self._cold
        make_room = self._make_room(shard)
        if read_one is None or shard in cold:
            cold.pop(shard, None)
            view = self._views.get(shard) if self._pid == os.getpid() else None
            if view is None:
                view = self.open(shard, make_room)
            if len(self._views) > self.max_open:
                self.trim(spare=shard)
            if make_room is not None and self.evictable(shard):
                note_random_access(self)
            self.random_reads += 1
            return view[index]
        cold[shard] = None
        if len(cold) > 4 * self.max_open:
            del cold[next(iter(cold))]
        pinned = self._pin(shard)
        try:
            for _ in range(3):
                if not self.is_ready(shard):
                    self.prepare(shard, make_room)
                paths = self.raw_paths(shard)
                self._check_current(shard)
                try:
                    if self.file_of(shard) not in self._checked:
                        self.check_files(shard, paths)
                    sample = read_one(paths, index)
                    self._check_current(shard, in_place_only=True)  # not rewritten between the check and the read
                    break
                except FileNotFoundError:  # deleted by hand between the check and the read
                    continue
            else:
                return self.view(shard)[index]
        finally:
            if pinned:
                self._locks(shard).release(self._use_byte(shard))
        if self.evictable(shard) and self.cache is not None:
            self.cache.touch(self.file_of(shard))
        return sample

    def _make_room(self, shard: int) -> Callable[[], None] | None:
        """What random access does while the cache has no room for ``shard``: close this process's other views
        (their pins keep files from eviction), or None without a cache limit."""
        if self.cache is None:
            return None
        return lambda: self.trim(keep=0, spare=shard)

    def check_files(self, shard: int, paths: Sequence[str]) -> None:
        """Check a shard's local raw files against the index (once per process; called when it is first opened).

        Every file must have the size the index declares; when the stream sets ``validate_hash`` and the index
        records that hash for the raw data, the file's hash must match too. A bad file that can be recreated (the
        stream has a remote copy, or the file is a decompressed copy of a compressed file still present) is removed,
        so that reading again fetches or decompresses it afresh; a file that is the only copy is never deleted.

        Raises:
            ShardCorruptError: naming the file and what differs.
            FileNotFoundError: a file disappeared meanwhile (the caller prepares the shard again).
        """
        stream = self.stream_of(shard)
        reader = self.readers[shard]
        algo = stream.validate_hash
        for (raw, zipped), path in zip(reader.parts, paths):
            stat = os.stat(path)
            size = stat.st_size
            problem = None
            if size != raw.bytes:
                problem = f'the file has {size} bytes but the index declares {raw.bytes}'
            elif algo and algo in raw.hashes:
                from streaming_core.storage.hashing import hash_file
                actual = hash_file(algo, path)
                if actual != raw.hashes[algo]:
                    problem = f'its {algo} is {actual} but the index records {raw.hashes[algo]}'
            if problem is not None:
                raise ShardCorruptError(self._bad_file(shard, path, zipped, problem, stat_identity(stat)))
        self._checked.add(self.file_of(shard))

    def _bad_file(self, shard: int, path: str, zipped: Any, problem: str, identity: tuple[int, ...]) -> str:
        """Remove a bad local file when another copy exists (and it is still the file that was checked: another
        process may have replaced it meanwhile); returns the message of the error to raise."""
        stream = self.stream_of(shard)
        zip_path = os.path.join(stream.local_dir, *zipped.basename.split('/')) if zipped is not None else None
        what = f'{path} (shard {shard}{f", decompressed from {zip_path}" if zip_path else ""})'
        if stream.has_remote_copy or (zip_path is not None and os.path.isfile(zip_path)):
            source = zip_path if zip_path is not None and os.path.isfile(zip_path) else \
                redact_url(stream.remote_dir or '')
            byte = self._prepare_byte(shard)
            locks = stream.locks()
            try:
                locks.acquire(byte, True, stream.wait_timeout, f'the preparation of {path}')
                try:
                    if stat_identity(os.stat(path)) == identity:
                        os.remove(path)
                except FileNotFoundError:
                    pass  # another thread or process found it bad first and removed it
                finally:
                    locks.release(byte)
            except OSError as err:  # a read-only directory: say so, the user removes it
                return (f'{what} is corrupt: {problem}. It could not be removed ({err}); delete it so it is recreated '
                        f'from {source}.')
            logger.info('removed corrupt %s: %s', path, problem)
            return f'{what} is corrupt: {problem}. The bad copy was removed; reading again recreates it from {source}.'
        return (f'{what} is corrupt: {problem}. It is the only copy of this data (no remote, no compressed file), so '
                f'it was left in place: restore it from the dataset\'s source, or rewrite the dataset.')

    def hold(self, shard: int) -> None:
        """An iterator of this process reads the shard's view: it is not closed until every holder releases it."""
        with self._views_lock:
            self._holds[shard] = self._holds.get(shard, 0) + 1

    def release(self, shard: int) -> None:
        """An iterator is done with the shard: close it once no iterator holds it (see :meth:`close`)."""
        with self._views_lock:
            count = self._holds.get(shard, 0) - 1
            if count > 0:
                self._holds[shard] = count
                return
            self._holds.pop(shard, None)
        self.close(shard)

    def close(self, shard: int) -> None:
        """Close a shard's view and release its pin. The view is dropped, never unmapped here: another thread may be
        reading a sample through it right now (``dataset[i]`` beside an iterator), and its memory map closes when the
        last reference goes, at once in CPython (on Linux a mapped file stays readable after eviction removes it)."""
        with self._views_lock:
            view = self._views.pop(shard, None)
        if view is None:
            return
        if self.evictable(shard) and self._pid == os.getpid():
            self._pinned.pop(shard, None)
            self._locks(shard).release(self._use_byte(shard))

    def trim(self, keep: int | None = None, spare: int | None = None) -> None:
        """Close the oldest views beyond ``keep`` (default ``max_open``), never one an iterator holds nor ``spare``
        (the one the caller is about to read)."""
        limit = self.max_open if keep is None else keep
        with self._views_lock:
            excess = len(self._views) - limit
            victims = [shard for shard in self._views
                       if shard not in self._holds and shard != spare][:max(excess, 0)]
        for shard in victims:
            self.close(shard)

    def close_all(self) -> None:
        """Close every view (releasing every pin)."""
        for shard in list(self._views):
            self.close(shard)

    def evict(self, shard: int) -> int:
        """Evict one shard's file now (not while any process reads any unit of it, never without a remote copy);
        returns bytes freed. Every unit naming the file becomes not ready."""
        units = self.catalogue.units_of_file(shard)
        if any(unit in self._holds for unit in units):
            return 0  # an iterator of this process is reading it
        for unit in units:
            self.close(unit)
        key = units[0]
        cache = self.cache
        if cache is not None:
            return cache.evict(key)
        if not self.stream_of(key).has_remote_copy or not self._try_lock_exclusive(key):
            return 0
        try:
            return self.stream_of(key).remove_shard_files(self.readers[key])
        finally:
            self._unlock_exclusive(key)
