"""Translate botocore / boto3 exceptions into streaming-core's storage errors.

* missing object or bucket (404, ``NoSuchKey``, ``NoSuchBucket``, ``NotFound``) -> :class:`RemoteNotFoundError`;
* access denied, bad or missing credentials, invalid request (401, 403, most 400s, parameter validation,
  unknown profile) -> :class:`PermanentStorageError`;
* everything else (5xx, ``SlowDown``, throttling, ``RequestTimeout``, connection resets, timeouts, truncated
  bodies) -> :class:`StorageError`, which the core retries.

Messages carry the error code and the server's message, never credentials.
"""

from __future__ import annotations

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    redact_url,
)

__all__ = ['translate', 'error_code', 'is_unsigned_retry_candidate']

_NOT_FOUND = {'404', 'NoSuchKey', 'NoSuchBucket', 'NotFound', 'NoSuchUpload'}
_RETRYABLE = {'RequestTimeout', 'RequestTimeoutException', 'SlowDown', 'Throttling', 'ThrottlingException',
              'ThrottledException', 'RequestThrottled', 'RequestThrottledException', 'TooManyRequestsException',
              'ProvisionedThroughputExceededException', 'TransactionInProgressException', 'RequestLimitExceeded',
              'BandwidthLimitExceeded', 'LimitExceededException', 'PriorRequestNotComplete', 'InternalError',
              'ServiceUnavailable', 'EC2ThrottledException', 'IDPCommunicationError', 'OperationAborted'}
_DENIED_HINT = ('Check the credentials (aws_access_key_id/aws_secret_access_key or profile options, the AWS_* '
                'variables, ~/.aws), the bucket policy, and for a requester-pays bucket set requester_pays=True or '
                'MOSAICML_STREAMING_AWS_REQUESTER_PAYS.')


def error_code(err: BaseException) -> tuple[str, int | None, str]:
    """``(code, HTTP status, message)`` of a botocore ``ClientError`` (empty values for other errors)."""
    response = getattr(err, 'response', None)
    if not isinstance(response, dict):
        return '', None, ''
    error = response.get('Error') or {}
    status = (response.get('ResponseMetadata') or {}).get('HTTPStatusCode')
    return str(error.get('Code', '')), status, str(error.get('Message', ''))


def is_unsigned_retry_candidate(err: BaseException) -> bool:
    """Whether the reference would retry this failure unsigned: a 400 (other than a timeout) or no credentials."""
    from botocore.exceptions import NoCredentialsError
    if isinstance(err, NoCredentialsError):
        return True
    code, status, _ = error_code(err)
    return status == 400 and code not in _RETRYABLE


def translate(err: BaseException, url: str, action: str) -> BaseException:
    """The streaming-core error for ``err``, raised while ``action`` (``'Download'``, ...) touched ``url``."""
    from botocore import exceptions as bex
    shown = redact_url(url)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    cause = err.__cause__ or err.__context__
    if type(err).__name__ == 'S3UploadFailedError' and cause is not None:
        return translate(cause, url, action)
    if isinstance(err, bex.ClientError):
        code, status, message = error_code(err)
        detail = f'{code}: {message}' if message and code != str(status) else (message or code)
        if code in _NOT_FOUND or status == 404:
            if code == 'NoSuchBucket':
                return RemoteNotFoundError(f'{action} of {shown} failed: the bucket does not exist ({detail}).')
            return RemoteNotFoundError(f'Remote object not found: {shown} ({detail}).')
        if code in _RETRYABLE or (status is not None and (status >= 500 or status == 429)):
            return StorageError(f'{action} of {shown} failed with a transient error (HTTP {status}, {detail}).')
        if status in (401, 403):
            return PermanentStorageError(f'{action} of {shown} was denied (HTTP {status}, {detail}). {_DENIED_HINT}')
        return PermanentStorageError(f'{action} of {shown} was rejected (HTTP {status}, {detail}).')
    if isinstance(err, (bex.NoCredentialsError, bex.PartialCredentialsError)):
        return PermanentStorageError(f'{action} of {shown} failed: no usable AWS credentials ({type(err).__name__}). '
                                     f'Set the AWS_* variables, a profile, or storage options; for a public bucket '
                                     f'use unsigned=True.')
    if isinstance(err, (bex.ProfileNotFound, bex.ConfigNotFound)):
        return PermanentStorageError(f'{action} of {shown} failed: {err}.')
    if isinstance(err, (bex.ParamValidationError, bex.InvalidEndpointConfigurationError,
                        bex.InvalidS3AddressingStyleError, bex.InvalidRegionError, bex.UnknownEndpointError)):
        return PermanentStorageError(f'{action} of {shown} failed: invalid request or configuration: {err}')
    if isinstance(err, (bex.HTTPClientError, bex.IncompleteReadError, bex.ResponseStreamingError,
                        bex.CredentialRetrievalError, ConnectionError, TimeoutError, OSError)):
        return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {err}')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {err}')
