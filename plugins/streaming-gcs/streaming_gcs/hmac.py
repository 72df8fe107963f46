"""GCS through its S3-compatible XML API with HMAC keys (the reference's ``GCS_KEY`` / ``GCS_SECRET`` mode).

A minimal boto3 client (``get_object``, ``put_object``, ``head_object``, ``list_objects_v2``) on
``https://storage.googleapis.com`` with region ``auto``. Unlike the reference, every ``ClientError`` is reported
(the reference swallowed all but 403/404/``NoSuchKey``): a missing object is :class:`RemoteNotFoundError`,
access problems are :class:`PermanentStorageError`, and throttling and server errors are retryable
:class:`StorageError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    ClientCache,
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    check_content_range,
    redact_url,
)

__all__ = ['GcsHmacClient', 'GCS_S3_ENDPOINT']

T = TypeVar('T')

#: GCS's S3-interoperable endpoint.
GCS_S3_ENDPOINT = 'https://storage.googleapis.com'

_RETRYABLE = {'RequestTimeout', 'SlowDown', 'TooManyRequests', 'InternalError', 'ServiceUnavailable',
              'RateLimitExceeded', 'BackendError'}


class GcsHmacClient(ProcessLocal):
    """The HMAC-mode operations on ``(bucket, key)``, one lazily created boto3 client per process and timeout."""

    def __init__(self, key: str, secret: str, endpoint: str | None = None) -> None:
        self._key = key
        self._secret = secret
        self.endpoint = endpoint or GCS_S3_ENDPOINT
        self._init_runtime()

    _process_local = ('_clients',)

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()

    def __repr__(self) -> str:
        return f'GcsHmacClient(endpoint={self.endpoint!r})'

    def reset(self) -> None:
        """Drop the clients."""
        self._clients.clear()

    def _client(self, timeout: float) -> Any:
        self._check_process()
        return self._clients.get(float(timeout), lambda: self._make_client(timeout))

    def _make_client(self, timeout: float) -> Any:
        import boto3
        from botocore.config import Config

        from streaming_core.plugin_api import install_log_redaction, register_secret
        config = Config(connect_timeout=min(float(timeout), 10.0), read_timeout=float(timeout),
                        retries={'total_max_attempts': 1, 'mode': 'standard'},
                        request_checksum_calculation='when_required',
                        response_checksum_validation='when_required', signature_version='s3v4')
        session = boto3.session.Session(aws_access_key_id=self._key, aws_secret_access_key=self._secret,
                                        region_name='auto')
        client = session.client('s3', endpoint_url=self.endpoint, config=config)
        register_secret(self._secret)
        install_log_redaction('botocore', 'boto3', 'urllib3')
        return client

    def _run(self, url: str, action: str, timeout: float, operation: Callable[[Any], T]) -> T:
        try:
            return operation(self._client(timeout))
        except Exception as err:
            raise _translate(err, url, action) from None

    def download(self, bucket: str, key: str, path: str, url: str, timeout: float) -> None:
        """GET the object into ``path`` (a short body raises a retryable error)."""
        def operation(client: Any) -> None:
            body = client.get_object(Bucket=bucket, Key=key)['Body']
            try:
                with open(path, 'wb') as out:
                    for chunk in body.iter_chunks(1 << 20):
                        out.write(chunk)
            finally:
                body.close()

        self._run(url, 'Download', timeout, operation)

    def read_range(self, bucket: str, key: str, start: int, length: int, url: str, timeout: float) -> bytes:
        """GET ``Range: bytes=start-end``: the bytes that exist there (none past the end); an answer for another
        range (its ``ContentRange``) is a retryable :class:`StorageError`."""
        end = start + length - 1

        def operation(client: Any) -> bytes:
            from botocore.exceptions import ClientError
            try:
                response = client.get_object(Bucket=bucket, Key=key, Range=f'bytes={start}-{end}')
            except ClientError as err:
                if (err.response.get('Error') or {}).get('Code') == 'InvalidRange':
                    return b''
                raise
            body = response['Body']
            try:
                data = body.read()
            finally:
                body.close()
            if response.get('ContentRange') is None \
                    and (response.get('ResponseMetadata') or {}).get('HTTPStatusCode') == 200:
                return data[start:end + 1]  # the whole object: the store ignored the range
            check_content_range(response.get('ContentRange'), start, end, len(data),
                                f'Ranged read of {redact_url(url)}')
            return data

        return self._run(url, 'Ranged read', timeout, operation)

    def upload(self, path: str, bucket: str, key: str, url: str, timeout: float) -> None:
        """PUT ``path`` as the object."""
        def operation(client: Any) -> None:
            with open(path, 'rb') as body:
                client.put_object(Bucket=bucket, Key=key, Body=body)

        self._run(url, 'Upload', timeout, operation)

    def exists(self, bucket: str, key: str, url: str, timeout: float) -> bool:
        """HEAD the object."""
        def operation(client: Any) -> bool:
            from botocore.exceptions import ClientError
            try:
                client.head_object(Bucket=bucket, Key=key)
            except ClientError as err:
                if (err.response.get('ResponseMetadata') or {}).get('HTTPStatusCode') == 404:
                    return False
                raise
            return True

        return self._run(url, 'Existence check', timeout, operation)

    def stat(self, bucket: str, key: str, url: str, timeout: float) -> dict[str, Any]:
        """HEAD the object: ``{'etag', 'size', 'mtime'}`` (as the etag, the generation when the store sends it; a
        404 raises :class:`RemoteNotFoundError` through the translation)."""
        def operation(client: Any) -> dict[str, Any]:
            head = client.head_object(Bucket=bucket, Key=key)
            headers = (head.get('ResponseMetadata') or {}).get('HTTPHeaders') or {}
            return _object_stat(head.get('ETag'), head.get('ContentLength'), head.get('LastModified'),
                                headers.get('x-goog-generation'))

        return self._run(url, 'Stat', timeout, operation)

    def list_stats(self, bucket: str, prefix: str, url: str, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every key under ``prefix`` with its etag, size and modification time."""
        def operation(client: Any) -> list[tuple[str, dict[str, Any]]]:
            found = []
            for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
                found.extend((f'gs://{bucket}/{item["Key"]}',
                              _object_stat(item.get('ETag'), item.get('Size'), item.get('LastModified'), None))
                             for item in page.get('Contents', ()))
            return sorted(found)

        return self._run(url, 'Listing', timeout, operation)

    def list(self, bucket: str, prefix: str, url: str, timeout: float) -> list[str]:
        """Every key under ``prefix``, as ``gs://`` URLs."""
        def operation(client: Any) -> list[str]:
            found = []
            for page in client.get_paginator('list_objects_v2').paginate(Bucket=bucket, Prefix=prefix):
                found.extend(f'gs://{bucket}/{item["Key"]}' for item in page.get('Contents', ()))
            return sorted(found)

        return self._run(url, 'Listing', timeout, operation)


def _object_stat(etag: Any, size: Any, modified: Any, generation: Any) -> dict[str, Any]:
    return {'etag': f'generation:{generation}' if generation else etag, 'size': size,
            'mtime': modified.isoformat() if modified is not None else None}


def _translate(err: BaseException, url: str, action: str) -> BaseException:
    from botocore import exceptions as bex
    shown = redact_url(url)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    if isinstance(err, bex.ClientError):
        error = err.response.get('Error') or {}
        code = str(error.get('Code', ''))
        message = str(error.get('Message', ''))
        status = (err.response.get('ResponseMetadata') or {}).get('HTTPStatusCode')
        detail = f'{code}: {message}' if message and message != code else code
        if status == 404 or code in ('NoSuchKey', 'NoSuchBucket', 'NotFound'):
            return RemoteNotFoundError(f'Remote object not found: {shown} ({detail}).')
        if code in _RETRYABLE or (status is not None and (status >= 500 or status == 429)):
            return StorageError(f'{action} of {shown} failed with a transient error (HTTP {status}, {detail}).')
        if status in (401, 403):
            return PermanentStorageError(f'{action} of {shown} was denied (HTTP {status}, {detail}): check GCS_KEY/'
                                         f'GCS_SECRET (or the hmac_key/hmac_secret storage options) and the '
                                         f'bucket permissions.')
        return PermanentStorageError(f'{action} of {shown} was rejected (HTTP {status}, {detail}).')
    if isinstance(err, bex.ParamValidationError):
        return PermanentStorageError(f'{action} of {shown} failed: invalid request: {err}')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {err}')
