"""The ``dbfs:`` storage backend on ``databricks-sdk``: Unity Catalog Volumes and DBFS.

URL forms:

* ``dbfs:/Volumes/<catalog>/<schema>/<volume>/<path>``: read, written, listed and checked through the Unity
  Catalog **Files API** (``/api/2.0/fs/files``, ``/api/2.0/fs/directories``). Files from ``multipart_threshold``
  bytes up (50 MiB by default) are uploaded in parts through presigned URLs when the workspace allows them; the
  SDK falls back to one ``PUT`` when it does not.
* ``dbfs:/<path>`` (the DBFS root): read through the Files API, as the reference does; written, listed and checked
  through the **DBFS API** (``/api/2.0/dbfs/create``/``add-block``/``close``, ``list``, ``get-status``);
  ranged reads use ``/api/2.0/dbfs/read``.

``dbfs:///...`` is the same URL. Authentication is the SDK's own (``DATABRICKS_HOST`` and ``DATABRICKS_TOKEN``,
``~/.databrickscfg`` profiles, OAuth, the Azure and Google methods, notebook context), plus the ``host``,
``token``, ``profile``, ``config_file`` and ``auth_type`` options. The SDK's own retries are off (every request
is one attempt) so that the core's retries, with backoff, govern throttling and transient failures alike.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

from streaming_core.plugin_api import (
    ClientCache,
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    check_content_range,
    check_options,
)
from streaming_databricks.errors import translate
from streaming_databricks.urls import DbfsUrl, parse_dbfs_url

__all__ = ['DatabricksBackend', 'OPTIONS']

T = TypeVar('T')

#: Every option ``DatabricksBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'host', 'token', 'profile', 'config_file', 'auth_type', 'multipart_threshold', 'part_size'})

_CHUNK = 64 << 10
_DBFS_READ_MAX = 1 << 20
_MAX_RESUMES = 5
#: What a ``416`` looks like once the SDK made it an exception (it keeps no status code): the reason phrase of an
#: empty answer, or the code or message of a JSON one.
_UNSATISFIABLE = re.compile(r'(?i)\b(requested[ _]range[ _]not[ _]satisfiable|range[ _]not[ _]satisfiable|'
                            r'unsatisfiable range|invalid[ _]?range)\b')


class _SingleAttemptClock:
    """A clock for the SDK under which every request is tried once: the first "sleep" between the SDK's own retry
    attempts moves this thread's time past any deadline, so the SDK gives up at once and the core retries."""

    def __init__(self) -> None:
        self._local = threading.local()

    def time(self) -> float:
        return time.time() + getattr(self._local, 'skew', 0.0)

    def sleep(self, seconds: float) -> None:
        self._local.skew = getattr(self._local, 'skew', 0.0) + 1e9


class DatabricksBackend(ProcessLocal):
    """``dbfs:/Volumes/...`` and ``dbfs:/...`` storage through the Databricks SDK.

    Args:
        host: The workspace URL (default: the SDK's, e.g. ``$DATABRICKS_HOST`` or the profile's).
        token: A personal access token (default: the SDK's, e.g. ``$DATABRICKS_TOKEN``); never shown.
        profile: A ``~/.databrickscfg`` profile (default ``$DATABRICKS_CONFIG_PROFILE``, else ``DEFAULT``).
        config_file: The config file holding the profiles (default ``$DATABRICKS_CONFIG_FILE`` or
            ``~/.databrickscfg``).
        auth_type: Force one SDK authentication method (``pat``, ``oauth-m2m``, ``azure-cli``...).
        multipart_threshold: Volume uploads of at least this many bytes go in parts (default 50 MiB, the SDK's).
        part_size: The part size of those uploads (default: the SDK's choice for the file size).
    """

    def __init__(self, **options: Any) -> None:
        check_options('dbfs', options, OPTIONS)
        self.host = options.get('host') or None
        self._token = options.get('token') or None
        self.profile = options.get('profile') or None
        self.config_file = options.get('config_file') or None
        self.auth_type = options.get('auth_type') or None
        self.multipart_threshold = _positive('multipart_threshold', options.get('multipart_threshold'))
        self.part_size = _positive('part_size', options.get('part_size'))
        from streaming_core.plugin_api import register_secret
        register_secret(self._token)
        register_secret(os.environ.get('DATABRICKS_TOKEN'))
        self._init_runtime()

    _process_local = ('_clients',)

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()  # one SDK client per process and timeout

    def __repr__(self) -> str:
        return f'DatabricksBackend(host={self.host!r}, profile={self.profile!r}, auth_type={self.auth_type!r})'

    def reset(self) -> None:
        """Drop the clients (the core calls this between retries)."""
        self._clients.clear()

    # Clients.
    def _client(self, timeout: float) -> Any:
        self._check_process()
        return self._clients.get(float(timeout), lambda: self._make_client(float(timeout)))

    def _make_client(self, timeout: float) -> Any:
        from databricks.sdk import WorkspaceClient
        from databricks.sdk.config import Config

        from streaming_core.plugin_api import install_log_redaction, register_secret
        install_log_redaction('databricks', 'urllib3')
        settings = {'host': self.host, 'token': self._token, 'profile': self.profile,
                    'config_file': self.config_file, 'auth_type': self.auth_type}
        config = Config(clock=_SingleAttemptClock(), http_timeout_seconds=timeout,
                        retry_timeout_seconds=max(int(math.ceil(timeout)), 1),
                        **{k: v for k, v in settings.items() if v is not None})
        for secret in ('token', 'client_secret', 'password', 'azure_client_secret'):
            register_secret(getattr(config, secret, None))
        if self.multipart_threshold is not None:
            config.files_ext_multipart_upload_min_stream_size = self.multipart_threshold
        return WorkspaceClient(config=config)

    def _run(self, target: DbfsUrl, action: str, timeout: float, operation: Callable[[Any], T]) -> T:
        try:
            return operation(self._client(timeout))
        except Exception as err:
            raise translate(err, target, action) from None

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Stream the file into ``path`` through the Files API; a connection lost mid-body resumes from the bytes
        already written (``Range``, guarded by ``If-Unmodified-Since``), and a short body is an error."""
        target = parse_dbfs_url(url, need_key=True)

        def operation(client: Any) -> None:
            with open(path, 'wb') as out:
                written, declared, modified, resumes = 0, None, None, 0
                while True:
                    headers = {'Accept': 'application/octet-stream'}
                    if written:
                        headers['Range'] = f'bytes={written}-'
                        if modified:
                            headers['If-Unmodified-Since'] = modified
                    response = self._get(client, target, headers)
                    if declared is None:
                        declared = _int(response.get('content-length'))
                        modified = response.get('last-modified')
                    elif not str(response.get('content-range') or '').startswith(f'bytes {written}-'):
                        response['contents'].close()
                        raise StorageError(f'Resuming {target.shown} at byte {written} gave another range '
                                           f'({response.get("content-range")!r}); the download starts again.')
                    body = response['contents']
                    body.set_chunk_size(_CHUNK)
                    progress = written
                    try:
                        while True:
                            chunk = body.read(_CHUNK)
                            if not chunk:
                                break
                            out.write(chunk)
                            written += len(chunk)
                        break
                    except Exception as err:
                        if not _is_transfer_error(err) or written == progress or resumes >= _MAX_RESUMES:
                            raise
                        resumes += 1
                    finally:
                        body.close()
            if declared is not None and written != declared:
                raise TruncatedDownloadError(f'GET {target.shown} returned {written} of {declared} bytes.')

        self._run(target, 'Download', timeout, operation)

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """Bytes ``[start, start + length)`` of the file (fewer at its end): an HTTP ``Range`` request for a
        volume, ``/api/2.0/dbfs/read`` (1 MiB at a time) for DBFS.

        Past the end of a volume file the Files API answers ``416 Range Not Satisfiable``: that, and only that, is
        ``b''`` (when the file's size confirms the range starts at or after its end); every other error is raised.
        A partial answer for another range than the one asked (its ``Content-Range``) is a retryable
        :class:`StorageError`."""
        target = parse_dbfs_url(url, need_key=True)
        if start < 0 or length < 0:
            raise ValueError(f'read_range needs start >= 0 and length >= 0, got start={start}, length={length}.')
        if length == 0:
            return b''

        def operation(client: Any) -> bytes:
            if not target.volume:
                return _dbfs_read(client, target.path, start, length)
            from databricks.sdk.errors import DatabricksError
            try:
                response = self._get(client, target, {'Accept': 'application/octet-stream',
                                                        'Range': f'bytes={start}-{start + length - 1}'})
            except DatabricksError as err:
                if _past_the_end(client, target, start, err):
                    return b''  # 416: the range starts at or after the end of the file
                raise
            body = response['contents']
            try:
                data = body.read()
            finally:
                body.close()
            if response.get('content-range'):
                check_content_range(response['content-range'], start, start + length - 1, len(data),
                                    f'Ranged read of {target.shown}')
                return data
            return _without_content_range(client, target, start, length, data)

        return self._run(target, 'Ranged read', timeout, operation)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` (volumes: the Files API, in parts above ``multipart_threshold``; DBFS: the DBFS API),
        then check the stored size, as the reference does (the upload API can fail silently)."""
        target = parse_dbfs_url(url, need_key=True)
        size = os.path.getsize(path)

        def operation(client: Any) -> None:
            if target.volume:
                kwargs = {'part_size': self.part_size} if self.part_size else {}
                client.files.upload_from(target.path, path, overwrite=True, use_parallel=False, **kwargs)
                stored = client.files.get_metadata(target.path).content_length
            else:
                with open(path, 'rb') as source:
                    client.dbfs.upload(target.path, source, overwrite=True)
                stored = client.dbfs.get_status(target.path).file_size
            if stored is not None and int(stored) != size:
                raise StorageError(f'Upload of {target.shown} stored {stored} bytes instead of {size}.')

        self._run(target, 'Upload', timeout, operation)

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether a file exists (``HEAD`` on the Files API for a volume, ``get-status`` for DBFS)."""
        return self._stat(url, timeout) is not None

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'size', 'mtime'}`` of the file.

        Raises:
            RemoteNotFoundError: there is no file at the URL (or only a directory).
        """
        found = self._stat(url, timeout)
        if found is None:
            raise RemoteNotFoundError(f'Remote object not found: {parse_dbfs_url(url, need_key=True).shown}')
        return found

    def _stat(self, url: str, timeout: float) -> dict[str, Any] | None:
        """``{'size', 'mtime'}`` of the file, or ``None`` when there is none (or only a directory)."""
        target = parse_dbfs_url(url, need_key=True)

        def operation(client: Any) -> dict[str, Any] | None:
            from databricks.sdk.errors import NotFound
            try:
                if target.volume:
                    meta = client.files.get_metadata(target.path)
                    return {'size': _int(meta.content_length), 'mtime': meta.last_modified}
                status = client.dbfs.get_status(target.path)
            except NotFound:
                return None
            if status.is_dir:
                return None
            return {'size': _int(status.file_size), 'mtime': status.modification_time}

        return self._run(target, 'Existence check', timeout, operation)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every file whose path starts with the URL's path, as URLs in the input's form (Files API listings are
        followed page by page)."""
        target = parse_dbfs_url(url, need_key=False)
        prefix = target.path
        start = prefix if prefix.endswith('/') else prefix.rsplit('/', 1)[0] + '/'

        def operation(client: Any) -> list[str]:
            found: list[str] = []
            pending = [start]
            while pending:
                directory = pending.pop()
                for path, is_dir in self._entries(client, target, directory):
                    if is_dir:
                        if (path.rstrip('/') + '/').startswith(prefix) or prefix.startswith(path.rstrip('/') + '/'):
                            pending.append(path.rstrip('/') + '/')
                    elif path.startswith(prefix):
                        found.append(target.child_url(path))
            return sorted(found)

        return self._run(target, 'Listing', timeout, operation)

    # Helpers.
    def _entries(self, client: Any, target: DbfsUrl, directory: str) -> list[tuple[str, bool]]:
        from databricks.sdk.errors import NotFound
        try:
            if target.volume:
                return [(e.path, bool(e.is_directory)) for e in client.files.list_directory_contents(directory)]
            listing = client.api_client.do('GET', '/api/2.0/dbfs/list', query={'path': directory.rstrip('/') or '/'})
            return [(f['path'], bool(f.get('is_dir'))) for f in listing.get('files', [])]
        except NotFound:
            return []

    @staticmethod
    def _get(client: Any, target: DbfsUrl, headers: dict[str, str]) -> dict[str, Any]:
        return client.api_client.do('GET', f'/api/2.0/fs/files{quote(target.path)}', headers=headers,
                                    response_headers=['content-length', 'last-modified', 'content-range'], raw=True)


def _past_the_end(client: Any, target: DbfsUrl, start: int, err: BaseException) -> bool:
    """Whether ``err`` (from a ranged GET) is the Files API's ``416 Range Not Satisfiable`` for a range that starts
    at or after the end of the file: the error names an unsatisfiable range (its code or message; the SDK keeps no
    status code), and the file's size, asked for once more, confirms it. Any other error (not found, denied,
    throttled, a message that merely contains the word "range") is not."""
    from databricks.sdk import errors as sdk
    if isinstance(err, (sdk.NotFound, sdk.PermissionDenied, sdk.Unauthenticated, sdk.TooManyRequests,
                        sdk.TemporarilyUnavailable, sdk.InternalError, sdk.DeadlineExceeded, sdk.Aborted)):
        return False
    if not _UNSATISFIABLE.search(f'{getattr(err, "error_code", None) or ""} {err}'):
        return False
    try:
        size = _int(client.files.get_metadata(target.path).content_length)
    except Exception:  # the size cannot be confirmed: the original error stands
        return False
    return size is not None and start >= size


def _without_content_range(client: Any, target: DbfsUrl, start: int, length: int, data: bytes) -> bytes:
    """The range asked, from an answer without ``Content-Range``: the whole file (a server that ignored the
    ``Range``) is sliced; otherwise the file's size tells the two apart, and a body of neither length is a
    retryable :class:`StorageError`."""
    if start == 0 or len(data) > length:
        return data[start:start + length]
    size = _int(client.files.get_metadata(target.path).content_length)
    if size is None or len(data) == size:
        return data[start:start + length]
    if len(data) == max(0, min(length, size - start)):
        return data
    raise StorageError(f'Ranged read of {target.shown} (bytes {start}-{start + length - 1}) returned {len(data)} '
                       f'bytes without a Content-Range, neither the range nor the whole file ({size} bytes).')


def _dbfs_read(client: Any, path: str, start: int, length: int) -> bytes:
    import base64
    chunks, offset, end = [], start, start + length
    while offset < end:
        response = client.dbfs.read(path, offset=offset, length=min(_DBFS_READ_MAX, end - offset))
        if not response.bytes_read:
            break
        chunk = base64.b64decode(response.data or '')
        chunks.append(chunk)
        offset += len(chunk)
    return b''.join(chunks)


def _is_transfer_error(err: BaseException) -> bool:
    import requests
    import urllib3
    return isinstance(err, (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, ConnectionError))


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PermanentStorageError(f'Invalid dbfs option {name}={value!r}: give a positive number of bytes.')
    return value
