"""Storage access through the backend registry: scheme dispatch, retries, atomic downloads, verified uploads."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from streaming_core.common.fork_safe import ForkSafeLock, ProcessLocal  # noqa: F401 (offered here since 0.1)
from streaming_core.errors import (
    DatasetVersionError,
    HashMismatchError,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    UnknownNameError,
    UnknownSchemeError,
    UploadError,
)
from streaming_core.machinery.protocols import StorageBackend
from streaming_core.storage.redact import redact_url
from streaming_core.storage.retries import backoff_delays
from streaming_core.storage.store_answers import confirm_upload
from streaming_core.storage.url import (  # noqa: F401 (names this module has always offered)
    _SINGLE_SLASH_SCHEMES,
    check_location,
    check_output,
    check_places,
    is_remote,
    join,
    local_not_found,
    local_path,
    url_scheme,
)

__all__ = ['ProcessLocal', 'url_scheme', 'is_remote', 'join', 'local_path', 'get_backend', 'download_file',
           'upload_file', 'exists', 'list_objects', 'with_retries', 'clear_backend_cache', 'temp_name', 'check_options',
           'split_bucket_url', 'LOCAL_FILE_ERRORS', 'ObjectStat', 'stat_object', 'read_range', 'ListedObject',
           'list_with_stats', 'pinned_location']

logger = logging.getLogger('streaming_core.storage.facade')

#: Local filesystem errors a backend passes through untranslated (a missing source file is not a remote error).
LOCAL_FILE_ERRORS: tuple[type[OSError], ...] = (FileNotFoundError, PermissionError, IsADirectoryError,
                                                NotADirectoryError)

T = TypeVar('T')

_backends: dict[tuple[int, str, tuple[tuple[str, Any], ...]], StorageBackend] = {}
_backends_lock = ForkSafeLock()  # a forked child never inherits it held


def _freeze(options: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if not options:
        return ()
    return tuple(sorted((str(k), repr(v)) for k, v in options.items()))


def check_options(scheme: str, options: Mapping[str, Any], allowed: Any) -> None:
    """Refuse ``storage_options`` keys a backend does not know, listing the ones it accepts.

    Raises:
        PermanentStorageError: naming the unknown keys and the valid ones.
    """
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise PermanentStorageError(f'Unknown storage option(s) for {scheme}:// : {unknown}. Valid options are '
                                    f'{sorted(allowed)}.')


def split_bucket_url(url: str, *, scheme: str, need_key: bool) -> tuple[str, str]:
    """Split ``scheme://bucket/key`` into ``(bucket, key)`` (the key as written, ``?`` and ``#`` included).

    Raises:
        PermanentStorageError: when the URL has another scheme, no bucket, or (with ``need_key``) no key.
    """
    from streaming_core.storage.url import StorageURL
    where = StorageURL.parse(url, scheme=scheme, need_key=need_key, literal_key=True)  # `?` and `#` in keys: kept
    return where.netloc, where.key


def get_backend(url: str, options: Mapping[str, Any] | None = None) -> StorageBackend:
    """The backend for ``url``'s scheme, created once per process and option set.

    Backends read their environment variables when created, so a test that changes them calls
    :func:`clear_backend_cache` first.
    """
    scheme = url_scheme(url) or 'file'
    key = (os.getpid(), scheme, _freeze(options))
    backend = _backends.get(key)
    if backend is None:
        try:
            from streaming_core.machinery.lookup import get_registry  # the plugin host, at the first URL
            factory = get_registry('storage').get(scheme)
        except UnknownSchemeError:
            raise
        except UnknownNameError as err:  # a ValueError too, as the reference's "Unsupported remote path"
            raise UnknownSchemeError(f'Unsupported remote path: {redact_url(url)}. {err}') from None
        with _backends_lock:
            backend = _backends.get(key)
            if backend is None:
                backend = factory(**dict(options or {}))
                _backends[key] = backend
    return backend


def clear_backend_cache() -> None:
    """Drop every cached backend (clients are recreated on next use)."""
    with _backends_lock:
        _backends.clear()


def temp_name(path: str) -> str:
    """A unique temporary name next to ``path`` (same directory, so a rename into place is atomic):
    ``<path>.<pid>-<host token>.<random>.tmp``, so that a sweep of dead writers' files judges only the files of its
    own host and PID namespace by their process id (:func:`host_token`)."""
    return f'{path}.{os.getpid()}-{host_token()}.{uuid.uuid4().hex[:8]}.tmp'


_HOST_TOKEN: str | None = None


def host_token() -> str:
    """Eight hex digits naming this host (its name and boot) and PID namespace: process ids mean something only
    among processes that share them. A cache on a shared filesystem, or shared by containers, holds temporary files
    of processes this one cannot see."""
    global _HOST_TOKEN
    if _HOST_TOKEN is None:
        import hashlib
        import socket
        parts = [socket.gethostname()]
        try:
            with open('/proc/sys/kernel/random/boot_id') as handle:
                parts.append(handle.read().strip())
        except OSError:
            pass
        try:
            parts.append(str(os.stat('/proc/self/ns/pid').st_ino))
        except OSError:
            pass
        _HOST_TOKEN = hashlib.blake2s('\0'.join(parts).encode('utf-8', 'surrogateescape'), digest_size=4).hexdigest()
    return _HOST_TOKEN


def write_file_atomic(path: str, data: bytes, *, sync: bool = True) -> None:
    """Put ``data`` at ``path`` atomically: a temporary name beside it (flushed to disk unless ``sync`` is False),
    then a rename (a reader sees the old file or the whole new one; a crash leaves no partial file under ``path``)."""
    tmp = temp_name(path)
    try:
        with open(tmp, 'wb') as handle:
            handle.write(data)
            if sync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _reset_hook(backend: StorageBackend) -> Callable[[], None] | None:
    """The backend's optional ``reset()`` (drop its clients so the next attempt starts afresh), made safe."""
    reset = getattr(backend, 'reset', None)
    if not callable(reset):
        return None

    def call() -> None:
        try:
            reset()
        except Exception as err:  # a failing reset must not hide the error being retried
            logger.debug('storage backend reset failed: %s', err)

    return call


def _retryable(err: BaseException) -> bool:
    if isinstance(err, (RemoteNotFoundError, PermanentStorageError, FileNotFoundError, PermissionError,
                        DatasetVersionError)):
        return False
    if isinstance(err, (KeyboardInterrupt, SystemExit, MemoryError)):
        return False
    return isinstance(err, Exception)


def with_retries(action: Callable[[], T], *, what: str, attempts: int, initial_backoff: float = 0.5,
                 on_failure: Callable[[], None] | None = None) -> T:
    """Run ``action`` up to ``attempts`` times with exponential backoff and jitter between tries.

    Not-found and permanent errors are raised at once. The last error is raised as it is, with a note naming
    ``what`` and the number of attempts. ``on_failure`` runs after each failed attempt that will be retried
    (backends use it to drop a client that may be in a bad state).
    """
    attempts = max(int(attempts), 1)
    delays = list(backoff_delays(attempts, initial_backoff, max_jitter=initial_backoff / 2))
    for attempt in range(attempts):
        try:
            return action()
        except BaseException as err:
            if not _retryable(err) or attempt == attempts - 1:
                if attempt and hasattr(err, 'add_note'):
                    err.add_note(f'{what}: failed after {attempt + 1} attempts.')
                raise
            if on_failure is not None:
                on_failure()
            logger.warning('%s failed (attempt %d of %d): %s: %s; retrying', what, attempt + 1, attempts,
                           type(err).__name__, err)
            time.sleep(delays[attempt])
    raise AssertionError('unreachable')


#: The slowest average rate (bytes per second) a shard's download may take beyond ``download_timeout``: an attempt
#: still running after ``timeout + size / MIN_DOWNLOAD_RATE`` seconds is abandoned and retried.
MIN_DOWNLOAD_RATE = 64 << 10


def _within(seconds: float, action: Callable[[], None], tmp: str, what: str) -> None:
    """Run ``action`` (a backend's download into ``tmp``) and wait at most ``seconds`` for it. A request waits for
    each answer at most its timeout, but a server that keeps sending a byte now and then never lets it end; such an
    attempt is abandoned (its thread ends when the backend gives up or the body ends; whatever it writes to ``tmp``
    then is removed) and fails with a retryable :class:`StorageError`."""
    done, outcome = threading.Event(), {}
    abandoned = threading.Event()

    def run() -> None:
        try:
            action()
        except BaseException as err:  # handed to the caller
            outcome['error'] = err
        finally:
            done.set()
            if abandoned.is_set():
                try:
                    os.remove(tmp)
                except OSError:
                    pass

    threading.Thread(target=run, name='streaming-core-download', daemon=True).start()
    if not done.wait(seconds):
        abandoned.set()
        raise StorageError(f'{what} did not finish within {seconds:.0f} s (the download timeout plus its size at '
                           f'{MIN_DOWNLOAD_RATE >> 10} KiB/s): the server sends too slowly.')
    if 'error' in outcome:
        raise outcome['error']


def download_file(url: str, path: str, *, timeout: float = 60.0, retries: int = 2,
                  expected_size: int | None = None, expected_hash: tuple[str, str] | None = None,
                  options: Mapping[str, Any] | None = None, initial_backoff: float = 0.5,
                  before_rename: Callable[[str], None] | None = None,
                  guard: Callable[[], AbstractContextManager[Any]] | None = None,
                  on_mismatch: Callable[[], None] | None = None) -> None:
    """Download ``url`` to ``path`` atomically (a unique temporary name, then a rename).

    Args:
        url: The remote URL or local path.
        path: The destination file.
        timeout: Per-request timeout in seconds, passed to the backend.
        retries: Retries after the first attempt (``0`` means a single attempt).
        expected_size: When given, a file of any other size is a truncated download and is retried.
        expected_hash: ``(algorithm, hex)`` to check after the download; a mismatch is retried, then raised as
            :class:`HashMismatchError`.
        options: Backend options (credentials profile, endpoint...).
        initial_backoff: The first retry's delay in seconds (doubles each retry, plus jitter).
        before_rename: Called with the temporary file once it passed the checks, before it is renamed into place
            (what it raises discards the file: a ``DatasetVersionError`` at once, a storage error after retries).
        guard: A context held around the rename (what it raises on entry discards the file, as ``before_rename``'s):
            a stream's check, under a shared lock, that its directory still wants this version.
        on_mismatch: Called when the remote file is certainly not the one expected (gone, or larger than
            ``expected_size``), before that is raised or retried: what it raises (a ``DatasetVersionError``: the
            dataset was rewritten) ends the download at once. A shorter file or another hash may be a transfer
            fault, and is retried first.
    """
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    backend = get_backend(url, options)
    shown = redact_url(url)
    remote = is_remote(url)

    def attempt() -> None:
        tmp = temp_name(path)
        try:
            try:
                if expected_size is None or not remote:
                    backend.download(url, tmp, timeout=timeout)
                else:  # the timeout bounds each wait of a request; a body trickling in must end too
                    _within(timeout + expected_size / MIN_DOWNLOAD_RATE,
                            lambda: backend.download(url, tmp, timeout=timeout), tmp,
                            f'Download of {shown} ({expected_size} bytes)')
            except FileNotFoundError as err:
                if on_mismatch is not None:
                    on_mismatch()
                if isinstance(err, RemoteNotFoundError):
                    raise
                raise RemoteNotFoundError(f'Remote object not found: {shown}') from err
            size = os.path.getsize(tmp)
            if expected_size is not None and size != expected_size:
                if on_mismatch is not None and size > expected_size:  # no cut download is longer
                    on_mismatch()
                cause = ('the download was cut, or the remote file was rewritten' if size < expected_size else
                         'the remote file was rewritten')
                raise TruncatedDownloadError(
                    f'Download of {shown} gave {size} bytes, but the index declares {expected_size}: {cause} since '
                    f'the index was read (then create the dataset again to read the new version).')
            if expected_hash is not None:
                from streaming_core.storage.hashing import hash_file
                algo, want = expected_hash
                got = hash_file(algo, tmp)
                if got != want:
                    raise HashMismatchError(f'Checksum failure: {path} ({algo} of {shown} is {got}, the index '
                                            f'records {want}).')
            if before_rename is not None:
                before_rename(tmp)
            with guard() if guard is not None else nullcontext():  # held for the rename alone
                os.replace(tmp, path)
        finally:
            try:  # an attempt given up by _within: its thread may remove it at the same moment
                os.remove(tmp)
            except FileNotFoundError:
                pass

    try:
        with_retries(attempt, what=f'Download of {shown}', attempts=retries + 1, initial_backoff=initial_backoff,
                     on_failure=_reset_hook(backend))
    except (StorageError, HashMismatchError, DatasetVersionError):
        raise
    except FileNotFoundError:
        raise
    except Exception as err:
        raise StorageError(f'Download of {shown} failed after {retries + 1} attempt(s): '
                           f'{type(err).__name__}: {err}') from err


def upload_file(path: str, url: str, *, timeout: float = 60.0, retries: int = 2, verify: bool = True,
                options: Mapping[str, Any] | None = None, initial_backoff: float = 0.5) -> None:
    """Upload the local file ``path`` to ``url`` with retries, then confirm the object exists.

    Raises:
        UploadError: naming the file and the URL, when every attempt failed or the object is absent afterwards.
    """
    backend = get_backend(url, options)
    shown = redact_url(url)

    def attempt() -> None:
        backend.upload(path, url, timeout=timeout)
        if verify:
            confirm_upload(backend, path, url, timeout, shown)

    try:
        with_retries(attempt, what=f'Upload of {path} to {shown}', attempts=retries + 1,
                     initial_backoff=initial_backoff, on_failure=_reset_hook(backend))
    except UploadError:
        raise
    except Exception as err:
        raise UploadError(f'Upload of {path} to {shown} failed: {type(err).__name__}: {err}') from err


def exists(url: str, *, timeout: float = 60.0, options: Mapping[str, Any] | None = None, retries: int = 2,
           initial_backoff: float = 0.5) -> bool:
    """Whether an object exists at ``url`` (transient failures are retried like downloads)."""
    backend = get_backend(url, options)
    return with_retries(lambda: backend.exists(url, timeout=timeout), what=f'Existence check of {redact_url(url)}',
                        attempts=retries + 1, initial_backoff=initial_backoff, on_failure=_reset_hook(backend))


def list_objects(url: str, *, timeout: float = 60.0, options: Mapping[str, Any] | None = None, retries: int = 2,
                 initial_backoff: float = 0.5) -> list[str]:
    """The sorted URLs of the objects under the prefix ``url`` (transient failures are retried)."""
    backend = get_backend(url, options)
    found = with_retries(lambda: backend.list(url, timeout=timeout), what=f'Listing of {redact_url(url)}',
                         attempts=retries + 1, initial_backoff=initial_backoff, on_failure=_reset_hook(backend))
    return sorted(found)


@dataclass(frozen=True)
class ObjectStat:
    """What identifies one version of a stored object without reading it.

    Attributes:
        size: Its size in bytes, when known.
        mtime: Its modification time as the store reports it (nanoseconds for local files), when known.
        etag: The store's entity tag, when it has one.
        inode: The inode number (local files only).
        ctime: The change time in nanoseconds (local files only: a file rewritten in place may get its old size and
            modification time back, never its old change time).
    """

    size: int | None = None
    mtime: str | None = None
    etag: str | None = None
    inode: int | None = None
    ctime: str | None = None

    @property
    def identity(self) -> str:
        """A string that changes whenever the object is rewritten (``''`` when nothing is known)."""
        parts = [f'{name}={value}' for name, value in (('etag', self.etag), ('size', self.size),
                                                        ('mtime', self.mtime), ('inode', self.inode),
                                                        ('ctime', self.ctime))
                 if value is not None and value != '']
        return ';'.join(parts)


def pinned_location(url: str, *, timeout: float = 60.0, options: Mapping[str, Any] | None = None) -> str:
    """``url`` pinned to the version reads of it give now, when its backend has ``pinned_url`` (a branch named by
    its commit), else ``url`` itself."""
    if not is_remote(url):
        return url
    pin = getattr(get_backend(url, options), 'pinned_url', None)
    return pin(url, timeout=timeout) if callable(pin) else url


def stat_object(url: str, *, timeout: float = 60.0, options: Mapping[str, Any] | None = None, retries: int = 2,
                initial_backoff: float = 0.5) -> ObjectStat | None:
    """Identify the current version of the object at ``url`` without downloading it, or ``None`` when its backend
    cannot tell.

    Local paths and ``file://`` URLs give ``(size, mtime_ns, inode, ctime_ns)``. A remote backend may provide an
    optional ``stat(url, *, timeout) -> Mapping`` (keys among ``etag``, ``size``, ``mtime``; missing object: raise
    ``FileNotFoundError``); without it, or when it returns nothing useful, this returns ``None`` and callers fall back
    to downloading and comparing bytes. Transient failures are retried like downloads.

    Raises:
        RemoteNotFoundError: when the object does not exist.
    """
    if not is_remote(url):
        path = local_path(url)
        try:
            info = os.stat(path)
        except FileNotFoundError as err:
            raise RemoteNotFoundError(local_not_found(url)) from err
        return ObjectStat(size=info.st_size, mtime=str(info.st_mtime_ns), inode=info.st_ino,
                          ctime=str(info.st_ctime_ns))
    backend = get_backend(url, options)
    stat = getattr(backend, 'stat', None)
    if not callable(stat):
        return None

    def attempt() -> Any:
        try:
            return stat(url, timeout=timeout)
        except FileNotFoundError as err:
            if isinstance(err, RemoteNotFoundError):
                raise
            raise RemoteNotFoundError(f'Remote object not found: {redact_url(url)}') from err

    found = with_retries(attempt, what=f'Stat of {redact_url(url)}', attempts=retries + 1,
                         initial_backoff=initial_backoff, on_failure=_reset_hook(backend))
    if not found:
        return None
    size = found.get('size')
    result = ObjectStat(size=int(size) if size is not None else None,
                        mtime=str(found['mtime']) if found.get('mtime') is not None else None,
                        etag=str(found['etag']) if found.get('etag') else None)
    return result if result.etag or (result.size is not None and result.mtime) else None


def read_range(url: str, start: int, length: int, *, timeout: float = 60.0, retries: int = 2,
               options: Mapping[str, Any] | None = None, initial_backoff: float = 0.5) -> bytes:
    """Read ``length`` bytes of the object at ``url`` from byte ``start`` (fewer at the end of the object).

    Uses the backend's optional ``read_range(url, start, length, *, timeout) -> bytes`` (one ranged request); a
    backend without it downloads the whole object to a temporary file and slices it. Local paths and ``file://``
    URLs are read directly. Transient failures are retried like downloads.

    Args:
        url: The remote URL or local path.
        start: The first byte (``>= 0``).
        length: How many bytes (``>= 0``); a range past the end gives the bytes that exist (possibly none).
        timeout: Per-request timeout in seconds.
        retries: Retries after the first attempt.
        options: Backend options.
        initial_backoff: The first retry's delay in seconds.

    Raises:
        ValueError: a negative ``start`` or ``length``.
        RemoteNotFoundError: the object does not exist.
        StorageError: every attempt failed (naming the URL, the range and the cause).
    """
    if isinstance(start, bool) or isinstance(length, bool) or int(start) != start or int(length) != length \
            or start < 0 or length < 0:
        raise ValueError(f'read_range of {redact_url(url)} needs integers start >= 0 and length >= 0, got '
                         f'start={start!r}, length={length!r}.')
    start, length = int(start), int(length)
    shown = redact_url(url)
    if length == 0:
        return b''
    if not is_remote(url):
        path = local_path(url)
        try:
            with open(path, 'rb') as handle:
                handle.seek(start)
                return handle.read(length)
        except FileNotFoundError as err:
            raise RemoteNotFoundError(f'Remote object not found: {shown}') from err
    backend = get_backend(url, options)
    ranged = getattr(backend, 'read_range', None)

    def attempt() -> bytes:
        try:
            if callable(ranged):
                data = bytes(ranged(url, start, length, timeout=timeout))
            else:
                data = _read_range_by_download(backend, url, start, length, timeout)
        except FileNotFoundError as err:
            if isinstance(err, RemoteNotFoundError):
                raise
            raise RemoteNotFoundError(f'Remote object not found: {shown}') from err
        if len(data) > length:
            raise PermanentStorageError(f'Ranged read of {shown} returned {len(data)} bytes for {length} asked: the '
                                        f'backend ignored the range.')
        return data

    what = f'Ranged read of {shown} (bytes {start}-{start + length - 1})'
    try:
        return with_retries(attempt, what=what, attempts=retries + 1, initial_backoff=initial_backoff,
                            on_failure=_reset_hook(backend))
    except (StorageError, FileNotFoundError):
        raise
    except Exception as err:
        raise StorageError(f'{what} failed after {retries + 1} attempt(s): {type(err).__name__}: {err}') from err


def _read_range_by_download(backend: StorageBackend, url: str, start: int, length: int, timeout: float) -> bytes:
    """The fallback of :func:`read_range`: the whole object into a temporary file, then the slice."""
    import tempfile
    handle, tmp = tempfile.mkstemp(prefix='streaming-range-', suffix='.tmp')
    os.close(handle)
    try:
        backend.download(url, tmp, timeout=timeout)
        with open(tmp, 'rb') as source:
            source.seek(start)
            return source.read(length)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@dataclass(frozen=True)
class ListedObject:
    """One object found under a prefix, with what identifies its version.

    Attributes:
        url: Its full URL (or local path).
        stat: Its size, etag and modification time as far as the store reports them in a listing.
    """

    url: str
    stat: ObjectStat


def list_with_stats(url: str, *, timeout: float = 60.0, options: Mapping[str, Any] | None = None, retries: int = 2,
                    initial_backoff: float = 0.5, broken: list[str] | None = None,
                    linked_dirs: list[str] | None = None) -> list[ListedObject]:
    """The objects under the prefix ``url`` with their sizes and etags / modification times, sorted by URL.

    Uses the backend's optional ``list_stats(url, *, timeout) -> list[(url, {'size', 'etag', 'mtime'})]`` (one
    listing gives everything, as S3's does); without it, :meth:`list` and then :func:`stat_object` per object (an
    object whose backend cannot stat it gets an empty :class:`ObjectStat`). Local paths are walked directly: links
    to directories are not followed (appended to ``linked_dirs`` when given), broken links are left out (appended to
    ``broken`` when given).
    """
    if not is_remote(url):
        found = []
        backend = get_backend(url, options)
        paths = backend.list(url, timeout=timeout, linked_dirs=linked_dirs) if linked_dirs is not None else \
            backend.list(url, timeout=timeout)
        for path in paths:
            try:
                info = os.stat(local_path(path))
            except FileNotFoundError:
                if broken is not None and os.path.islink(local_path(path)):
                    broken.append(path)
                continue  # removed meanwhile, or a broken link
            found.append(ListedObject(path, ObjectStat(size=info.st_size, mtime=str(info.st_mtime_ns),
                                                       inode=info.st_ino, ctime=str(info.st_ctime_ns))))
        return sorted(found, key=lambda item: item.url)
    backend = get_backend(url, options)
    detailed = getattr(backend, 'list_stats', None)
    if callable(detailed):
        rows = with_retries(lambda: detailed(url, timeout=timeout), what=f'Listing of {redact_url(url)}',
                            attempts=retries + 1, initial_backoff=initial_backoff, on_failure=_reset_hook(backend))
        out = []
        for item_url, info in rows:
            size = info.get('size')
            out.append(ListedObject(item_url, ObjectStat(
                size=int(size) if size is not None else None,
                mtime=str(info['mtime']) if info.get('mtime') is not None else None,
                etag=str(info['etag']) if info.get('etag') else None)))
        return sorted(out, key=lambda item: item.url)
    out = []
    for item_url in list_objects(url, timeout=timeout, options=options, retries=retries,
                                 initial_backoff=initial_backoff):
        try:
            stat = stat_object(item_url, timeout=timeout, options=options, retries=retries,
                               initial_backoff=initial_backoff)
        except RemoteNotFoundError:  # removed meanwhile
            continue
        out.append(ListedObject(item_url, stat or ObjectStat()))
    return out
