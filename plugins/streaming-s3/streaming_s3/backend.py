"""The ``s3://bucket/key`` storage backend (AWS S3 and every S3-compatible store) on boto3.

One :class:`S3Backend` exists per process and option set (the core caches it), so one job can read AWS S3 with
one set of options and an R2, B2 or MinIO bucket with another. boto3 is imported on first use, and the clients
are created lazily per process and timeout, dropped on pickling, after a fork, and when the core calls
:meth:`S3Backend.reset` between retries.

Retries: boto3's own retries are off by default (``client_retries=0``: one attempt per call) so that the core's
policy (``download_retry`` attempts, exponential backoff with jitter, a fresh client between attempts) is the
only one, and a ``download_timeout`` bounds each attempt instead of being multiplied by hidden retries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

from streaming_core.plugin_api import (
    ClientCache,
    PermanentStorageError,
    ProcessLocal,
    StorageURL,
    check_content_range,
    check_options,
    get_list_arg,
    redact_url,
)
from streaming_s3.errors import is_unsigned_retry_candidate, translate

__all__ = ['S3Backend', 'OPTIONS']

logger = logging.getLogger('streaming_s3')

T = TypeVar('T')

#: Every option ``S3Backend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({
    'endpoint_url', 'profile', 'region', 'addressing_style', 'aws_access_key_id', 'aws_secret_access_key',
    'aws_session_token', 'unsigned', 'unsigned_fallback', 'requester_pays', 'canned_acl', 'verify', 'use_ssl',
    'client_retries', 'connect_timeout', 'checksums', 'multipart_threshold', 'max_pool_connections',
})

_CHECKSUM_MODES = ('when_supported', 'when_required')


class S3Backend(ProcessLocal):
    """``s3://`` storage through boto3.

    Args:
        endpoint_url: An S3-compatible endpoint (R2, B2, MinIO, CoreWeave...). Default: ``$S3_ENDPOINT_URL``,
            else AWS (botocore also honours ``AWS_ENDPOINT_URL_S3``).
        profile: A profile of ``~/.aws/config`` / ``~/.aws/credentials`` (default: ``$AWS_PROFILE`` or default).
        region: The region name (default: the profile's or ``$AWS_DEFAULT_REGION``).
        addressing_style: ``'path'``, ``'virtual'`` or ``'auto'`` (MinIO usually wants ``'path'``).
        aws_access_key_id, aws_secret_access_key, aws_session_token: Explicit credentials for this stream.
        unsigned: Anonymous (unsigned) requests, for public buckets.
        unsigned_fallback: As the reference does, retry once unsigned after a 400 or when no credentials are
            found (default ``True``); ``False`` reports those errors instead.
        requester_pays: ``True`` (every bucket), or a bucket name or list of names, that get
            ``RequestPayer='requester'``. Default: ``$MOSAICML_STREAMING_AWS_REQUESTER_PAYS`` (comma-separated).
        canned_acl: The ACL given to uploaded objects (default: ``$S3_CANNED_ACL``).
        verify: ``False`` to skip TLS verification, or a CA bundle path.
        use_ssl: ``False`` to use plain HTTP.
        client_retries: Extra attempts boto3 makes itself per call (default 0: the core's retries govern).
        connect_timeout: Seconds to wait for a connection (default: the request timeout, at most 10).
        checksums: botocore's ``request_checksum_calculation`` and ``response_checksum_validation``. Default:
            ``'when_required'`` with a custom endpoint (many S3-compatible stores reject the newer default
            checksum headers), botocore's default (``'when_supported'``) on AWS.
        multipart_threshold: Uploads larger than this many bytes use multipart (default 128 MiB).
        max_pool_connections: The connection pool size per client (default 32).
    """

    def __init__(self, **options: Any) -> None:
        check_options('s3', options, OPTIONS)
        self.options = dict(options)
        endpoint = options.get('endpoint_url')
        self.endpoint_url = endpoint if endpoint is not None else (os.environ.get('S3_ENDPOINT_URL') or None)
        self.profile = options.get('profile')
        self.region = options.get('region')
        self.addressing_style = options.get('addressing_style')
        if self.addressing_style not in (None, 'path', 'virtual', 'auto'):
            raise PermanentStorageError(f"Invalid s3 option addressing_style={self.addressing_style!r}: use 'path', "
                                        f"'virtual' or 'auto'.")
        self.unsigned = bool(options.get('unsigned', False))
        self.unsigned_fallback = bool(options.get('unsigned_fallback', True))
        self.canned_acl = options.get('canned_acl', os.environ.get('S3_CANNED_ACL') or None)
        self.requester_pays = _requester_pays(options.get('requester_pays'))
        self.client_retries = int(options.get('client_retries', 0))
        self.connect_timeout = options.get('connect_timeout')
        self.checksums = options.get('checksums', 'when_required' if self.endpoint_url else None)
        if self.checksums not in (None, *_CHECKSUM_MODES):
            raise PermanentStorageError(f'Invalid s3 option checksums={self.checksums!r}: use one of '
                                        f'{_CHECKSUM_MODES}.')
        self.multipart_threshold = int(options.get('multipart_threshold', 128 << 20))
        self.max_pool_connections = int(options.get('max_pool_connections', 32))
        self._credentials = {name: options.get(name) for name in
                             ('aws_access_key_id', 'aws_secret_access_key', 'aws_session_token')}
        self._init_runtime()

    _process_local = ('_clients', '_session', '_fell_back')

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()
        self._session: Any = None  # kept across resets: its loaded service models make new clients cheap
        self._fell_back = False

    def __repr__(self) -> str:
        return f'S3Backend(endpoint_url={self.endpoint_url!r}, profile={self.profile!r}, unsigned={self.unsigned})'

    def reset(self) -> None:
        """Drop every client; the next request creates a fresh one (called by the core between retries)."""
        self._clients.clear()

    # Clients.
    def _client(self, timeout: float, unsigned: bool) -> Any:
        self._check_process()
        return self._clients.get((float(timeout), unsigned), lambda: self._make_client(timeout, unsigned))

    def _make_client(self, timeout: float, unsigned: bool) -> Any:
        import boto3
        import botocore
        from botocore.config import Config
        config: dict[str, Any] = {
            'connect_timeout': float(self.connect_timeout or min(timeout, 10.0)),
            'read_timeout': float(timeout),
            'retries': {'total_max_attempts': 1 + self.client_retries, 'mode': 'standard'},
            'max_pool_connections': self.max_pool_connections,
        }
        if self.addressing_style:
            config['s3'] = {'addressing_style': self.addressing_style}
        if unsigned:
            config['signature_version'] = botocore.UNSIGNED
        if self.checksums:
            config['request_checksum_calculation'] = self.checksums
            config['response_checksum_validation'] = self.checksums
        kwargs: dict[str, Any] = {'config': Config(**config)}
        if self.endpoint_url:
            kwargs['endpoint_url'] = self.endpoint_url
        if self.options.get('verify') is not None:
            kwargs['verify'] = self.options['verify']
        if self.options.get('use_ssl') is not None:
            kwargs['use_ssl'] = bool(self.options['use_ssl'])
        try:
            if self._session is None:
                self._session = boto3.session.Session(profile_name=self.profile, region_name=self.region,
                                                      **{k: v for k, v in self._credentials.items() if v})
                _mask_credentials(self._session)
            return self._session.client('s3', **kwargs)
        except Exception as err:
            raise translate(err, f's3://{self.endpoint_url or "aws"}', 'Creating the S3 client') from None

    def _call(self, url: str, action: str, timeout: float, operation: Callable[[Any], T], write: bool = False) -> T:
        """Run ``operation(client)``; on a 400 or missing credentials retry once unsigned (unless disabled), for a read
        only: a write is never made anonymous. Only missing credentials make later reads unsigned at once; after a 400
        (an expired token...) each read tries its credentials first again."""
        unsigned = self.unsigned or (self._fell_back and not write)
        try:
            return operation(self._client(timeout, unsigned))
        except Exception as err:
            if unsigned or write or not self.unsigned_fallback or not is_unsigned_retry_candidate(err):
                raise translate(err, url, action) from None
            first = err
        logger.info('%s of %s: %s with credentials; retrying unsigned (anonymous), as for a public bucket',
                    action, redact_url(url), type(first).__name__)
        try:
            result = operation(self._client(timeout, True))
        except Exception as err:
            raise translate(err, url, action) from None
        from botocore.exceptions import NoCredentialsError
        self._fell_back = isinstance(first, NoCredentialsError)
        return result

    def _extra(self, bucket: str) -> dict[str, str]:
        return {'RequestPayer': 'requester'} if _pays(self.requester_pays, bucket) else {}

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Stream the object at ``url`` into ``path`` (one GET; a short body raises a retryable error)."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3', need_key=True)
        bucket, key = where.bucket, where.key
        extra = self._extra(bucket)

        def operation(client: Any) -> None:
            response = client.get_object(Bucket=bucket, Key=key, **extra)
            body = response['Body']
            try:
                with open(path, 'wb') as out:
                    for chunk in body.iter_chunks(1 << 20):
                        out.write(chunk)
            finally:
                body.close()

        self._call(url, 'Download', timeout, operation)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` to ``url`` (one PUT, or multipart above ``multipart_threshold``)."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3', need_key=True)
        bucket, key = where.bucket, where.key
        extra = self._extra(bucket)
        acl = self.canned_acl
        if acl:
            extra['ACL'] = acl
        size = os.path.getsize(path)

        def operation(client: Any) -> None:
            if size <= self.multipart_threshold:
                with open(path, 'rb') as body:
                    client.put_object(Bucket=bucket, Key=key, Body=body, **extra)
                return
            from boto3.s3.transfer import TransferConfig
            chunk = max(self.multipart_threshold // 2, 8 << 20)
            client.upload_file(path, bucket, key, ExtraArgs=extra or None,
                               Config=TransferConfig(multipart_threshold=self.multipart_threshold,
                                                     multipart_chunksize=chunk, max_concurrency=4))

        self._call(url, 'Upload', timeout, operation, write=True)

    def exists(self, url: str, *, timeout: float) -> bool:
        """HEAD the object: ``True`` if present, ``False`` on a 404."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3', need_key=True)
        bucket, key = where.bucket, where.key
        extra = self._extra(bucket)

        def operation(client: Any) -> bool:
            from botocore.exceptions import ClientError
            try:
                client.head_object(Bucket=bucket, Key=key, **extra)
            except ClientError as err:
                status = (err.response.get('ResponseMetadata') or {}).get('HTTPStatusCode')
                if status == 404:
                    return False
                raise
            return True

        return self._call(url, 'Existence check', timeout, operation)

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size', 'mtime'}`` of the object, from one HEAD: the etag alone would not tell a rewrite with
        the same bytes (it is their MD5), the modification time does.

        Raises:
            RemoteNotFoundError: there is no such object.
        """
        where = StorageURL.parse(url, literal_key=True, scheme='s3', need_key=True)
        bucket, key = where.bucket, where.key
        extra = self._extra(bucket)

        def operation(client: Any) -> dict[str, Any]:
            head = client.head_object(Bucket=bucket, Key=key, **extra)
            modified = head.get('LastModified')
            return {'etag': head.get('ETag'), 'size': head.get('ContentLength'),
                    'mtime': modified.isoformat() if modified is not None else None}

        return self._call(url, 'Stat', timeout, operation)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every object whose key starts with the URL's key, as ``s3://bucket/key`` URLs, sorted."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3')
        bucket, prefix = where.bucket, where.key
        extra = self._extra(bucket)

        def operation(client: Any) -> list[str]:
            found = []
            for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix, **extra):
                found.extend(f's3://{bucket}/{item["Key"]}' for item in page.get('Contents', ()))
            return sorted(found)

        return self._call(url, 'Listing', timeout, operation)


    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """GET ``Range=bytes=start-end`` of the object: the bytes that exist there (none past its end). A partial
        answer for another range than the one asked (its ``ContentRange``) is a retryable :class:`StorageError`."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3', need_key=True)
        bucket, key = where.bucket, where.key
        extra = self._extra(bucket)
        if length <= 0:
            return b''

        def operation(client: Any) -> bytes:
            from botocore.exceptions import ClientError
            try:
                response = client.get_object(Bucket=bucket, Key=key, Range=f'bytes={start}-{start + length - 1}',
                                             **extra)
            except ClientError as err:
                if (err.response.get('Error') or {}).get('Code') == 'InvalidRange':
                    return b''
                raise
            body = response['Body']
            try:
                data = body.read()
            finally:
                body.close()
            status = (response.get('ResponseMetadata') or {}).get('HTTPStatusCode')
            if status == 206 or response.get('ContentRange') is not None:
                check_content_range(response.get('ContentRange'), start, start + length - 1, len(data),
                                     f'Ranged read of {redact_url(url)}')
                return data
            return data[start:start + length]  # a store that ignored the range: the whole object

        return self._call(url, 'Ranged read', timeout, operation)

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every object under the prefix with its etag, size and modification time (one paginated listing)."""
        where = StorageURL.parse(url, literal_key=True, scheme='s3')
        bucket, prefix = where.bucket, where.key
        extra = self._extra(bucket)

        def operation(client: Any) -> list[tuple[str, dict[str, Any]]]:
            found = []
            for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix, **extra):
                for item in page.get('Contents', ()):
                    modified = item.get('LastModified')
                    found.append((f's3://{bucket}/{item["Key"]}', {
                        'etag': item.get('ETag'), 'size': item.get('Size'),
                        'mtime': modified.isoformat() if modified is not None else None}))
            return sorted(found)

        return self._call(url, 'Listing', timeout, operation)


def _requester_pays(option: Any) -> bool | frozenset[str]:
    if option is None:
        return frozenset(get_list_arg(os.environ.get('MOSAICML_STREAMING_AWS_REQUESTER_PAYS')))
    if isinstance(option, bool):
        return option
    if isinstance(option, str):
        return frozenset(get_list_arg(option))
    try:
        return frozenset(str(name) for name in option)
    except TypeError:
        raise PermanentStorageError(f'Invalid s3 option requester_pays={option!r}: use True/False, a bucket name or '
                                    f'a list of bucket names.') from None


def _pays(setting: bool | frozenset[str], bucket: str) -> bool:
    return setting if isinstance(setting, bool) else bucket in setting


def _mask_credentials(session: Any) -> None:
    """Keep the session's credentials out of botocore's DEBUG logs (it logs signed request headers)."""
    from streaming_core.plugin_api import install_log_redaction, register_secret
    try:
        credentials = session.get_credentials()
    except Exception:  # no credentials resolvable yet: nothing to mask
        credentials = None
    if credentials is not None:
        register_secret(credentials.secret_key)
        register_secret(credentials.token)
    install_log_redaction('botocore', 'boto3', 's3transfer', 'urllib3')
