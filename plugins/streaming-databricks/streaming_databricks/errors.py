"""Mapping databricks-sdk errors onto the core's storage errors (codes and messages, never credentials)."""

from __future__ import annotations

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    redact_text,
)
from streaming_databricks.urls import DbfsUrl

__all__ = ['translate', 'volumes_hint']

_AUTH_HINT = ('Configure Databricks authentication: set DATABRICKS_HOST and DATABRICKS_TOKEN, or a profile in '
              '~/.databrickscfg (storage_options={"profile": ...}), or pass storage_options={"host": ..., '
              '"token": ...}.')


def volumes_hint(target: DbfsUrl) -> str:
    """What a ``PERMISSION_DENIED`` on a DBFS (non-volume) path probably means."""
    parts = [p for p in target.path.split('/') if p]
    if parts and parts[0].lower() == 'volumes':
        return (f' Unity Catalog volume paths start with a capital V: did you mean '
                f'dbfs:/Volumes/{"/".join(parts[1:])}?')
    if len(parts) >= 4:
        return (f' This URL addresses the DBFS root, which many workspaces no longer allow. If the data is in a Unity '
                f'Catalog volume, the URL is probably dbfs:/Volumes/{"/".join(parts)} '
                f'(dbfs:/Volumes/CATALOG/SCHEMA/VOLUME/PATH).')
    return (' This URL addresses the DBFS root, which many workspaces no longer allow; for a Unity Catalog volume '
            'use dbfs:/Volumes/CATALOG/SCHEMA/VOLUME/PATH.')


def _unwrap(err: BaseException) -> BaseException:
    """The SDK's retry wrapper raises ``TimeoutError``/``RuntimeError`` from the request's own error: use that."""
    seen = 0
    while isinstance(err, (TimeoutError, RuntimeError)) and err.__cause__ is not None and seen < 5:
        text = str(err)
        if not (text.startswith('Timed out after') or text.startswith('Exceeded max retry')):
            break
        err, seen = err.__cause__, seen + 1
    return err


def translate(err: BaseException, target: DbfsUrl, action: str) -> BaseException:
    """The core's error for an SDK failure of ``action`` on ``target``: not found, permanent (denied, invalid,
    unconfigured) or transient (throttled, unavailable, a lost connection), which the core retries."""
    from databricks.sdk import errors as sdk

    shown = target.shown
    err = _unwrap(err)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    if isinstance(err, sdk.DatabricksError):
        code = err.error_code or type(err).__name__
        detail = redact_text(f'{code}: {err}')
        api = 'Files API' if target.volume else 'DBFS'
        if isinstance(err, sdk.NotFound):
            return RemoteNotFoundError(f'Remote object not found: {shown} ({api}: {detail}).')
        if isinstance(err, sdk.TooManyRequests):
            return StorageError(f'{action} of {shown} was throttled by Databricks ({detail}); it is retried with '
                                f'backoff. If this persists, raise download_retry (reading) or retry (writing).')
        if isinstance(err, (sdk.TemporarilyUnavailable, sdk.InternalError, sdk.DeadlineExceeded, sdk.Aborted)):
            return StorageError(f'{action} of {shown} failed with a transient error ({detail}).')
        if isinstance(err, sdk.PermissionDenied):
            hint = '' if target.volume else volumes_hint(target)
            return PermanentStorageError(f'{action} of {shown} was denied ({detail}).{hint}')
        if isinstance(err, sdk.Unauthenticated):
            return PermanentStorageError(f'{action} of {shown} was not authenticated ({detail}). {_AUTH_HINT}')
        return PermanentStorageError(f'{action} of {shown} was rejected ({detail}).')
    if isinstance(err, ValueError) and ('auth' in str(err).lower() or 'host' in str(err).lower()):
        return PermanentStorageError(f'{action} of {shown} failed: Databricks is not configured: '
                                     f'{redact_text(str(err))} {_AUTH_HINT}')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {redact_text(str(err))}')
