"""The ``gs://bucket/key`` storage backend.

Authentication, first match wins (HMAC first, as in the reference):

1. HMAC keys (options ``hmac_key``/``hmac_secret``, else ``GCS_KEY``/``GCS_SECRET``): the S3-compatible XML API
   at ``https://storage.googleapis.com`` (or ``endpoint``) through boto3 (:mod:`streaming_gcs.hmac`).
2. An emulator (option ``endpoint``, else ``STORAGE_EMULATOR_HOST``): google-cloud-storage against it with
   anonymous credentials (unless ``credentials_file`` is also given).
3. A service-account key file (option ``credentials_file``).
4. ``anonymous=True``: unauthenticated access to public buckets.
5. Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, the gcloud configuration, the metadata
   server); none at all raises :class:`PermanentStorageError` naming every way to provide credentials.

The client is created once per process (credentials are fetched once, not per download, which keeps many
DataLoader workers from overloading the metadata server) and never pickled. google-cloud-storage's own retries
are disabled (``retry=None``) so that the core's retry policy governs; every request carries the timeout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    ClientCache,
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    StorageURL,
    check_content_range,
    check_options,
    redact_url,
)
from streaming_gcs.hmac import GcsHmacClient

__all__ = ['GcsBackend', 'OPTIONS', 'NO_CREDENTIALS_MESSAGE']

T = TypeVar('T')

#: Every option ``GcsBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'project', 'credentials_file', 'endpoint', 'anonymous', 'hmac_key', 'hmac_secret',
                     'universe_domain'})

NO_CREDENTIALS_MESSAGE = (
    'No Google Cloud Storage credentials were found. Provide one of: HMAC keys (GCS_KEY and GCS_SECRET, or the '
    'hmac_key/hmac_secret storage options); a service-account key file (GOOGLE_APPLICATION_CREDENTIALS or the '
    'credentials_file storage option); Application Default Credentials (`gcloud auth application-default login`, '
    'or a GCE/GKE metadata server); or anonymous=True for a public bucket.')

_SCOPES = ('https://www.googleapis.com/auth/devstorage.read_write',)


class GcsBackend(ProcessLocal):
    """``gs://`` storage through google-cloud-storage (or the S3 API with HMAC keys).

    Args:
        project: The billing project (default: the credentials' project).
        credentials_file: A service-account JSON key file.
        endpoint: The API endpoint: an emulator's URL (anonymous credentials), or in HMAC mode the S3-compatible
            endpoint. Default: ``$STORAGE_EMULATOR_HOST``, else Google's.
        anonymous: Unauthenticated requests, for public buckets.
        hmac_key, hmac_secret: HMAC keys (default: ``$GCS_KEY`` and ``$GCS_SECRET``).
        universe_domain: A non-default Google Cloud universe (sovereign clouds); it must match the credentials'.
    """

    def __init__(self, **options: Any) -> None:
        check_options('gs', options, OPTIONS)
        self.project = options.get('project')
        self.credentials_file = options.get('credentials_file')
        self.anonymous = bool(options.get('anonymous', False))
        self.universe_domain = options.get('universe_domain')
        key = options.get('hmac_key') or os.environ.get('GCS_KEY')
        secret = options.get('hmac_secret') or os.environ.get('GCS_SECRET')
        if bool(options.get('hmac_key')) != bool(options.get('hmac_secret')):
            raise PermanentStorageError('Give both hmac_key and hmac_secret storage options, or neither.')
        endpoint = options.get('endpoint')
        self._hmac = GcsHmacClient(key, secret, endpoint) if key and secret else None
        if endpoint is None and self._hmac is None:
            endpoint = os.environ.get('STORAGE_EMULATOR_HOST') or None
        if endpoint and '://' not in endpoint:
            endpoint = 'http://' + endpoint
        self.endpoint = endpoint
        self._init_runtime()

    @property
    def mode(self) -> str:
        """``'hmac'``, ``'emulator'``, ``'service_account'``, ``'anonymous'`` or ``'adc'``."""
        if self._hmac is not None:
            return 'hmac'
        if self.endpoint and not self.credentials_file:
            return 'emulator'
        if self.credentials_file:
            return 'service_account'
        return 'anonymous' if self.anonymous else 'adc'

    _process_local = ('_clients', '_sessions')

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()
        self._sessions: ClientCache[Any] = ClientCache()

    def __repr__(self) -> str:
        return f'GcsBackend(mode={self.mode!r}, endpoint={self.endpoint!r})'

    def reset(self) -> None:
        """Drop the client (the core calls this between retries)."""
        self._clients.clear()
        self._sessions.clear()
        if self._hmac is not None:
            self._hmac.reset()

    def _client(self) -> Any:
        self._check_process()
        return self._clients.get(None, self._make_client)

    def _make_client(self) -> Any:
        from google.cloud import storage
        options: dict[str, str] = {}
        if self.endpoint:
            options['api_endpoint'] = self.endpoint
        if self.universe_domain:
            options['universe_domain'] = self.universe_domain
        credentials, project = self._credentials()
        try:
            return storage.Client(project=project, credentials=credentials, client_options=options or None)
        except ValueError as err:  # e.g. the universe domain of the credentials and the client differ
            raise PermanentStorageError(f'Cannot configure the GCS client: {err}') from None

    def _session(self) -> Any:
        """An authorized HTTP session with the client's credentials, for the JSON API requests the client does not
        expose the answer of (ranged reads, whose ``Content-Range`` is checked)."""
        self._check_process()

        def make() -> Any:
            from google.auth.transport.requests import AuthorizedSession
            return AuthorizedSession(self._credentials()[0])
        return self._sessions.get(None, make)

    def _api_root(self) -> str:
        if self.endpoint:
            return self.endpoint.rstrip('/')
        return f'https://storage.{self.universe_domain or "googleapis.com"}'

    def _credentials(self) -> tuple[Any, str | None]:
        """The credentials and project of the configured mode (see the module docstring)."""
        project = self.project
        if self.credentials_file:
            from google.oauth2 import service_account
            try:
                credentials = service_account.Credentials.from_service_account_file(self.credentials_file,
                                                                                    scopes=_SCOPES)
            except (OSError, ValueError) as err:
                raise PermanentStorageError(f'Cannot load the GCS service-account key file {self.credentials_file}: '
                                            f'{type(err).__name__}: {err}') from None
            project = project or credentials.project_id
        elif self.endpoint or self.anonymous:
            from google.auth.credentials import AnonymousCredentials
            credentials = AnonymousCredentials()
            project = project or ('test' if self.endpoint else None)
        else:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError
            try:
                credentials, default_project = google.auth.default(scopes=_SCOPES)
            except DefaultCredentialsError:
                raise PermanentStorageError(NO_CREDENTIALS_MESSAGE) from None
            project = project or default_project
        return credentials, project

    def _run(self, url: str, action: str, operation: Callable[[Any], T]) -> T:
        try:
            return operation(self._client())
        except Exception as err:
            raise _translate(err, url, action) from None

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Download the object (checksums verified by the client when the server sends them)."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs', need_key=True)
        bucket, key = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.download(bucket, key, path, url, timeout)
        self._run(url, 'Download', lambda client: client.bucket(bucket).blob(key).download_to_filename(
            path, timeout=timeout, retry=None))
        return None

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` (one multipart request, or a resumable upload above 8 MiB)."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs', need_key=True)
        bucket, key = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.upload(path, bucket, key, url, timeout)
        self._run(url, 'Upload', lambda client: client.bucket(bucket).blob(key).upload_from_filename(
            path, timeout=timeout, retry=None))
        return None

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """GET ``Range: bytes=start-end`` of the object's media: the bytes that exist there (none past its end). An
        answer for another range than the one asked (its ``Content-Range``) is a retryable :class:`StorageError`."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs', need_key=True)
        bucket, key = where.bucket, where.key
        if length <= 0:
            return b''
        if self._hmac is not None:
            return self._hmac.read_range(bucket, key, start, length, url, timeout)
        end = start + length - 1
        media = f'{self._api_root()}/download/storage/v1/b/{quote(bucket, safe="")}/o/{quote(key, safe="")}'

        def operation() -> bytes:
            response = self._session().get(media, params={'alt': 'media'}, headers={'Range': f'bytes={start}-{end}'},
                                           timeout=timeout)
            with response:
                if response.status_code == 416:
                    return b''
                if response.status_code not in (200, 206):
                    from google.api_core.exceptions import from_http_response
                    raise from_http_response(response)
                data = response.content
                if response.status_code == 200:  # the whole object: the server ignored the range
                    return data[start:end + 1]
                shown = response.headers.get('Content-Range', '')
                total = shown.rpartition('/')[2]
                if not data and total.isdigit() and start >= int(total):  # a 206 with nothing: past the end
                    return b''
                check_content_range(shown, start, end, len(data), f'Ranged read of {redact_url(url)}')
                return data

        try:
            return operation()
        except Exception as err:
            raise _translate(err, url, 'Ranged read') from None

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether the object exists."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs', need_key=True)
        bucket, key = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.exists(bucket, key, url, timeout)
        return self._run(url, 'Existence check',
                         lambda client: bool(client.bucket(bucket).blob(key).exists(timeout=timeout, retry=None)))

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size', 'mtime'}`` of the object from its metadata (as the etag, its generation, which every
        write of its data changes).

        Raises:
            RemoteNotFoundError: there is no such object.
        """
        where = StorageURL.parse(url, literal_key=True, scheme='gs', need_key=True)
        bucket, key = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.stat(bucket, key, url, timeout)
        blob = self._run(url, 'Stat', lambda client: client.bucket(bucket).get_blob(key, timeout=timeout, retry=None))
        if blob is None:
            raise RemoteNotFoundError(f'Remote object not found: {redact_url(url)}')
        return _blob_stat(blob)

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every object under the prefix with its etag, size and modification time (one paginated listing)."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs')
        bucket, prefix = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.list_stats(bucket, prefix, url, timeout)
        return self._run(url, 'Listing', lambda client: sorted(
            (f'gs://{bucket}/{blob.name}', _blob_stat(blob))
            for blob in client.list_blobs(bucket, prefix=prefix or None, timeout=timeout, retry=None)))

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every object under the prefix, as ``gs://bucket/name`` URLs, sorted."""
        where = StorageURL.parse(url, literal_key=True, scheme='gs')
        bucket, prefix = where.bucket, where.key
        if self._hmac is not None:
            return self._hmac.list(bucket, prefix, url, timeout)
        return self._run(url, 'Listing', lambda client: sorted(
            f'gs://{bucket}/{blob.name}'
            for blob in client.list_blobs(bucket, prefix=prefix or None, timeout=timeout, retry=None)))


def _blob_stat(blob: Any) -> dict[str, Any]:
    """The object's generation (new at every write of its data, unlike its etag, which a metadata update changes
    too) as its etag; its etag only when no generation is given."""
    updated = blob.updated
    return {'etag': f'generation:{blob.generation}' if blob.generation else blob.etag, 'size': blob.size,
            'mtime': updated.isoformat() if updated is not None else None}


def _translate(err: BaseException, url: str, action: str) -> BaseException:
    """Map google-cloud-storage, google-auth and requests errors onto the core's storage errors."""
    from google.api_core import exceptions as gex
    from google.auth import exceptions as aex
    shown = redact_url(url)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    if isinstance(err, gex.GoogleAPICallError):
        code = getattr(err, 'code', None)
        message = getattr(err, 'message', '') or ''
        if isinstance(err, gex.NotFound):
            return RemoteNotFoundError(f'Remote object not found: {shown} (HTTP 404: the object or its bucket does '
                                       f'not exist).')
        if isinstance(err, (gex.TooManyRequests, gex.ServerError, gex.RequestRangeNotSatisfiable)) or code in (408,):
            return StorageError(f'{action} of {shown} failed with a transient error (HTTP {code}): {message}')
        if isinstance(err, (gex.Unauthorized, gex.Forbidden)):
            return PermanentStorageError(f'{action} of {shown} was denied (HTTP {code}): {message} Check the '
                                         f'credentials and the bucket permissions.')
        return PermanentStorageError(f'{action} of {shown} was rejected (HTTP {code}): {message}')
    if isinstance(err, aex.DefaultCredentialsError):
        return PermanentStorageError(NO_CREDENTIALS_MESSAGE)
    if isinstance(err, aex.RefreshError) and not getattr(err, 'retryable', False):
        return PermanentStorageError(f'{action} of {shown} failed: the GCS credentials could not be refreshed '
                                     f'({type(err).__name__}). Check the service account or ADC configuration.')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {err}')
