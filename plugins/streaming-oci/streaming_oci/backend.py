"""The ``oci://bucket@namespace/path`` storage backend (OCI Object Storage) on the ``oci`` SDK.

URL forms: ``oci://bucket@namespace/path``, or ``oci://bucket/path`` with the namespace from the ``namespace``
option or, failing that, from the API (``GetNamespace``, once per process).

Configuration, first match wins:

* ``auth='instance_principal'`` or ``'resource_principal'``: the SDK's signers for OCI compute / functions;
* ``config`` option: a complete SDK configuration dict (``user``, ``fingerprint``, ``tenancy``, ``region``,
  ``key_file`` or ``key_content``, optional ``pass_phrase``);
* the config file: option ``config_file``, else ``$OCI_CONFIG_FILE``, else ``~/.oci/config``; profile from the
  option ``profile``, else ``$OCI_CONFIG_PROFILE``, else ``DEFAULT``;
* when no config file exists: ``$OCI_CLI_USER``, ``$OCI_CLI_FINGERPRINT``, ``$OCI_CLI_TENANCY``,
  ``$OCI_CLI_REGION``, ``$OCI_CLI_KEY_FILE`` and optionally ``$OCI_CLI_PASSPHRASE`` (the OCI CLI's names).

``region`` overrides the configured region; ``service_endpoint`` (or ``$OCI_SERVICE_ENDPOINT``) replaces the
regional endpoint. The SDK's retry strategy is off (``NoneRetryStrategy``) so that the core's retries govern,
and every client carries ``(connect, read)`` timeouts. Objects are uploaded with one ``PutObject`` (up to 50 GiB,
far above any shard).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    ClientCache,
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    StorageURL,
    TruncatedDownloadError,
    check_content_range,
    check_options,
    redact_url,
)

__all__ = ['OciBackend', 'OPTIONS', 'parse_oci_url']

T = TypeVar('T')

#: Every option ``OciBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'config_file', 'profile', 'config', 'region', 'service_endpoint', 'namespace', 'auth'})

_ENV_CONFIG = {'user': 'OCI_CLI_USER', 'fingerprint': 'OCI_CLI_FINGERPRINT', 'tenancy': 'OCI_CLI_TENANCY',
               'region': 'OCI_CLI_REGION', 'key_file': 'OCI_CLI_KEY_FILE', 'pass_phrase': 'OCI_CLI_PASSPHRASE'}
_CHUNK = 4 << 20


def parse_oci_url(url: str, *, need_key: bool) -> tuple[str, str | None, str]:
    """Split ``oci://bucket[@namespace]/path`` into ``(bucket, namespace or None, path)``.

    Raises:
        PermanentStorageError: for another scheme, a missing bucket, or (with ``need_key``) a missing object.
    """
    where = StorageURL.parse(url, literal_key=True, scheme='oci', need_key=need_key, label='OCI', usage='oci://BUCKET@NAMESPACE/PATH',
                             namespace=True)
    return where.bucket, where.namespace or None, where.key


class OciBackend(ProcessLocal):
    """``oci://`` storage through the oci SDK.

    Args:
        config_file: The SDK config file (default ``$OCI_CONFIG_FILE`` or ``~/.oci/config``).
        profile: The profile in it (default ``$OCI_CONFIG_PROFILE`` or ``DEFAULT``).
        config: A complete SDK configuration dict, instead of a file.
        region: Overrides the configured region.
        service_endpoint: The Object Storage endpoint (default ``$OCI_SERVICE_ENDPOINT`` or the region's).
        namespace: The namespace for URLs without ``@namespace`` (default: asked from the API).
        auth: ``'api_key'`` (default), ``'instance_principal'`` or ``'resource_principal'``.
    """

    def __init__(self, **options: Any) -> None:
        check_options('oci', options, OPTIONS)
        self.config_file = options.get('config_file') or os.environ.get('OCI_CONFIG_FILE') or None
        self.profile = options.get('profile') or os.environ.get('OCI_CONFIG_PROFILE') or 'DEFAULT'
        self._config = dict(options['config']) if options.get('config') else None
        self.region = options.get('region')
        self.service_endpoint = options.get('service_endpoint') or os.environ.get('OCI_SERVICE_ENDPOINT') or None
        self.default_namespace = options.get('namespace')
        self.auth = options.get('auth', 'api_key')
        if self.auth not in ('api_key', 'instance_principal', 'resource_principal'):
            raise PermanentStorageError(f"Invalid oci option auth={self.auth!r}: use 'api_key', 'instance_principal' "
                                        f"or 'resource_principal'.")
        self._init_runtime()

    _process_local = ('_clients', '_namespace')

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()
        self._namespace: str | None = None

    def __repr__(self) -> str:
        return (f'OciBackend(config_file={self.config_file!r}, profile={self.profile!r}, '
                f'service_endpoint={self.service_endpoint!r})')

    def reset(self) -> None:
        """Drop the clients (the core calls this between retries)."""
        self._clients.clear()

    # Configuration and clients.
    def _load_config(self) -> tuple[dict[str, Any], Any]:
        import oci
        if self.auth == 'instance_principal':
            signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
            return {'region': self.region or signer.region}, signer
        if self.auth == 'resource_principal':
            signer = oci.auth.signers.get_resource_principals_signer()
            return {'region': self.region or signer.region}, signer
        if self._config is not None:
            config = dict(self._config)
        else:
            path = os.path.expanduser(self.config_file or oci.config.DEFAULT_LOCATION)
            if os.path.exists(path):
                config = oci.config.from_file(path, self.profile)
            elif all(os.environ.get(_ENV_CONFIG[k]) for k in ('user', 'fingerprint', 'tenancy', 'key_file')):
                config = {k: os.environ[v] for k, v in _ENV_CONFIG.items() if os.environ.get(v)}
            else:
                raise PermanentStorageError(
                    f'No OCI configuration: {path} does not exist and the OCI_CLI_USER, OCI_CLI_FINGERPRINT, '
                    f'OCI_CLI_TENANCY and OCI_CLI_KEY_FILE variables are not all set. Create the config file '
                    f'(`oci setup config`), pass config_file/profile or config in storage_options, or use '
                    f"auth='instance_principal'.")
        if self.region:
            config['region'] = self.region
        oci.config.validate_config(config)
        return config, None

    def _client(self, timeout: float) -> Any:
        self._check_process()
        return self._clients.get(float(timeout), lambda: self._make_client(timeout))

    def _make_client(self, timeout: float) -> Any:
        import oci
        config, signer = self._load_config()
        kwargs: dict[str, Any] = {'retry_strategy': oci.retry.NoneRetryStrategy(),
                                  'timeout': (min(float(timeout), 10.0), float(timeout))}
        if self.service_endpoint:
            kwargs['service_endpoint'] = self.service_endpoint
        if signer is not None:
            kwargs['signer'] = signer
        return oci.object_storage.ObjectStorageClient(config, **kwargs)

    def _run(self, url: str, action: str, timeout: float, operation: Callable[[Any, str], T],
             namespace: str | None) -> T:
        try:
            client = self._client(timeout)
            return operation(client, namespace or self._get_namespace(client))
        except Exception as err:
            raise _translate(err, url, action) from None

    def _get_namespace(self, client: Any) -> str:
        if self.default_namespace:
            return self.default_namespace
        if self._namespace is None:
            self._namespace = client.get_namespace().data
        return self._namespace

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Stream the object into ``path`` in 4 MiB chunks; a body shorter than ``Content-Length`` is an error."""
        bucket, namespace, key = parse_oci_url(url, need_key=True)

        def operation(client: Any, ns: str) -> None:
            response = client.get_object(ns, bucket, key)
            declared = response.headers.get('Content-Length')
            raw = response.data.raw
            written = 0
            try:
                with open(path, 'wb') as out:
                    for chunk in raw.stream(_CHUNK, decode_content=False):
                        out.write(chunk)
                        written += len(chunk)
            finally:
                response.data.close()
            if declared is not None and str(declared).isdigit() and int(declared) != written:
                raise TruncatedDownloadError(f'GET {redact_url(url)} returned {written} of {declared} bytes.')

        self._run(url, 'Download', timeout, operation, namespace)

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """``GetObject`` with ``Range: bytes=start-end``: the bytes that exist there (none past the end, where OCI
        answers 416). An answer for another range (its ``Content-Range``) is a retryable :class:`StorageError`."""
        bucket, namespace, key = parse_oci_url(url, need_key=True)
        if length <= 0:
            return b''
        end = start + length - 1

        def operation(client: Any, ns: str) -> bytes:
            import oci
            try:
                response = client.get_object(ns, bucket, key, range=f'bytes={start}-{end}')
            except oci.exceptions.ServiceError as err:
                if err.status == 416:
                    return b''
                raise
            try:
                data = response.data.raw.read(decode_content=False)
            finally:
                response.data.close()
            if response.status == 200:  # the whole object: the server ignored the range
                return data[start:end + 1]
            check_content_range(response.headers.get('Content-Range'), start, end, len(data),
                                f'Ranged read of {redact_url(url)}')
            return data

        return self._run(url, 'Ranged read', timeout, operation, namespace)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` with one ``PutObject``."""
        bucket, namespace, key = parse_oci_url(url, need_key=True)
        size = os.path.getsize(path)

        def operation(client: Any, ns: str) -> None:
            with open(path, 'rb') as body:
                client.put_object(ns, bucket, key, body, content_length=size)

        self._run(url, 'Upload', timeout, operation, namespace)

    def exists(self, url: str, *, timeout: float) -> bool:
        """HEAD the object."""
        bucket, namespace, key = parse_oci_url(url, need_key=True)

        def operation(client: Any, ns: str) -> bool:
            import oci
            try:
                client.head_object(ns, bucket, key)
            except oci.exceptions.ServiceError as err:
                if err.status == 404 and err.code != 'BucketNotFound':
                    return False
                raise
            return True

        return self._run(url, 'Existence check', timeout, operation, namespace)

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size', 'mtime'}`` of the object, from one HEAD (OCI's etag is new at every write).

        Raises:
            RemoteNotFoundError: there is no such object (through the translation).
        """
        bucket, namespace, key = parse_oci_url(url, need_key=True)

        def operation(client: Any, ns: str) -> dict[str, Any]:
            headers = client.head_object(ns, bucket, key).headers
            size = headers.get('content-length')
            return {'etag': headers.get('etag'), 'size': int(size) if size is not None else None,
                    'mtime': headers.get('last-modified')}

        return self._run(url, 'Stat', timeout, operation, namespace)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every object under the prefix (following ``nextStartWith`` pages), as URLs in the input's form."""
        return [item for item, _ in self._list(url, timeout, 'name')]

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every object under the prefix with its etag, size and modification time (one paginated listing)."""
        return self._list(url, timeout, 'name,size,etag,timeModified')

    def _list(self, url: str, timeout: float, fields: str) -> list[tuple[str, dict[str, Any]]]:
        bucket, namespace, prefix = parse_oci_url(url, need_key=False)
        base = StorageURL.parse(url, literal_key=True, scheme='oci').base

        def operation(client: Any, ns: str) -> list[tuple[str, dict[str, Any]]]:
            found: list[tuple[str, dict[str, Any]]] = []
            start = None
            while True:
                kwargs = {'prefix': prefix or None, 'fields': fields}
                if start:
                    kwargs['start'] = start
                page = client.list_objects(ns, bucket, **kwargs).data
                for item in page.objects or ():
                    modified = item.time_modified
                    found.append((base + item.name, {
                        'etag': item.etag, 'size': item.size,
                        'mtime': modified.isoformat() if modified is not None else None}))
                start = page.next_start_with
                if not start:
                    return sorted(found)

        return self._run(url, 'Listing', timeout, operation, namespace)


def _translate(err: BaseException, url: str, action: str) -> BaseException:
    """Map oci SDK errors onto the core's storage errors (messages carry codes, never key material)."""
    import oci
    shown = redact_url(url)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    if isinstance(err, oci.exceptions.ServiceError):
        status, code, message = err.status, err.code or '', err.message or ''
        detail = f'{code}: {message}' if code else message
        if status == 404:
            if code == 'BucketNotFound':
                return RemoteNotFoundError(f'{action} of {shown} failed: the bucket does not exist or is not '
                                           f'accessible ({detail}).')
            return RemoteNotFoundError(f'Remote object not found: {shown} ({detail or "HTTP 404"}).')
        if status >= 500 or status in (408, 429) or code == 'ConcurrentObjectUpdate':
            return StorageError(f'{action} of {shown} failed with a transient error (HTTP {status}, {detail}).')
        if status in (401, 403):
            return PermanentStorageError(f'{action} of {shown} was denied (HTTP {status}, {detail}): check the OCI '
                                         f'configuration (user, fingerprint, key file, tenancy) and the policies.')
        return PermanentStorageError(f'{action} of {shown} was rejected (HTTP {status}, {detail}).')
    permanent = (oci.exceptions.ConfigFileNotFound, oci.exceptions.InvalidConfig, oci.exceptions.ProfileNotFound,
                 oci.exceptions.InvalidPrivateKey, oci.exceptions.MissingPrivateKeyPassphrase,
                 oci.exceptions.InvalidKeyFilePath)
    if isinstance(err, permanent):
        return PermanentStorageError(f'{action} of {shown} failed: the OCI configuration is unusable: '
                                     f'{type(err).__name__}: {err}')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {err}')
