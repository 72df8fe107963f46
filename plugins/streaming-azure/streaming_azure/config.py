"""Accounts, endpoints, credentials and error mapping shared by the ``azure`` and ``azure-dl`` backends.

Credentials, first match wins: the ``connection_string`` option; the ``account_key`` option; the
``sas_token`` option; ``credential='anonymous'`` (public containers); ``$AZURE_STORAGE_CONNECTION_STRING``;
``$AZURE_ACCOUNT_ACCESS_KEY`` (with ``$AZURE_ACCOUNT_NAME``); otherwise azure-identity's
``DefaultAzureCredential`` (environment service principal, workload identity, managed identity, Azure CLI, ...),
or with ``credential='cli'`` the Azure CLI login alone.

The endpoint is ``account_url`` (alias ``endpoint``; for example Azurite's ``http://127.0.0.1:10000/devstoreaccount1``),
else the connection string's, else ``https://<account>.blob.<endpoint_suffix>`` (``.dfs.`` for Data Lake), with
``endpoint_suffix`` defaulting to ``core.windows.net``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from streaming_core.plugin_api import (
    LOCAL_FILE_ERRORS,
    PermanentStorageError,
    RemoteNotFoundError,
    StorageError,
    check_options,
    redact_url,
)

__all__ = ['AzureSettings', 'OPTIONS', 'translate']

#: Every option the azure and azure-dl backends accept (``storage_options`` keys).
OPTIONS = frozenset({'account', 'account_key', 'connection_string', 'sas_token', 'account_url', 'endpoint',
                     'endpoint_suffix', 'credential', 'url_form', 'connect_timeout'})

_CREDENTIALS = ('default', 'cli', 'anonymous')


def _connection_string_fields(text: str) -> dict[str, str]:
    fields = {}
    for part in text.split(';'):
        name, sep, value = part.partition('=')
        if sep:
            fields[name.strip().lower()] = value.strip()
    return fields


class AzureSettings:
    """The resolved configuration of one backend instance (options first, then environment variables)."""

    def __init__(self, scheme: str, options: dict[str, Any]) -> None:
        check_options(scheme, options, OPTIONS)
        self.scheme = scheme
        self.credential_kind = options.get('credential', 'default')
        if self.credential_kind not in _CREDENTIALS:
            raise PermanentStorageError(f'Invalid {scheme} option credential={self.credential_kind!r}: use one of '
                                        f'{_CREDENTIALS}.')
        self.url_form = options.get('url_form', 'auto')
        self.endpoint_suffix = options.get('endpoint_suffix') or 'core.windows.net'
        self.connect_timeout = options.get('connect_timeout')
        self._connection_string = options.get('connection_string')
        self._key = options.get('account_key')
        self._sas = options.get('sas_token')
        if not (self._connection_string or self._key or self._sas or self.credential_kind == 'anonymous'):
            self._connection_string = os.environ.get('AZURE_STORAGE_CONNECTION_STRING') or None
            if not self._connection_string:
                self._key = os.environ.get('AZURE_ACCOUNT_ACCESS_KEY') or None
        account_url = options.get('account_url') or options.get('endpoint')
        fields = _connection_string_fields(self._connection_string) if self._connection_string else {}
        if self._connection_string and not fields.get('accountname') and not fields.get('sharedaccesssignature'):
            raise PermanentStorageError(f'The {scheme} connection string has no AccountName (or SharedAccessSignature)'
                                        f' field; copy it whole from the storage account\'s "Access keys" page.')
        self.account_url = account_url or None
        self.account = (options.get('account') or fields.get('accountname') or os.environ.get('AZURE_ACCOUNT_NAME')
                        or _account_of_url(self.account_url) or None)

    def secrets(self) -> list[str]:
        """The secret values among the settings (to keep out of logs)."""
        fields = _connection_string_fields(self._connection_string) if self._connection_string else {}
        return [value for value in (self._key, self._sas, fields.get('accountkey'),
                                    fields.get('sharedaccesssignature')) if value]

    @property
    def pinned_account(self) -> bool:
        """Whether the endpoint or the credential belongs to one account (so a URL naming another is an error)."""
        return bool(self.account_url or self._connection_string or self._key or self._sas)

    def check_account(self, account: str | None, url: str) -> str:
        """The account to use for ``url``, which named ``account`` (``None``: it named none)."""
        if account and self.account and account != self.account and self.pinned_account:
            raise PermanentStorageError(f'{redact_url(url)} names the storage account {account!r}, but the storage '
                                        f'options configure account {self.account!r} (endpoint or credential).')
        chosen = account or self.account
        if not chosen:
            raise PermanentStorageError(f'No Azure storage account for {redact_url(url)}: set the account option, '
                                        f'AZURE_ACCOUNT_NAME, a connection string, or use the URL form '
                                        f'azure://<account>.blob.core.windows.net/<container>/<path>.')
        return chosen

    def service_url(self, account: str, kind: str) -> str:
        """The ``blob`` or ``dfs`` service URL for ``account``."""
        if self.account_url:
            url = self.account_url.rstrip('/')
        else:
            url = f'https://{account}.blob.{self.endpoint_suffix}'
        if kind == 'dfs':
            url = url.replace('.blob.', '.dfs.')
        return url

    def client_kwargs(self, timeout: float) -> dict[str, Any]:
        """Transport settings: no SDK retries (the core retries), connect and read timeouts."""
        return {'retry_total': 0, 'connection_timeout': float(self.connect_timeout or min(float(timeout), 10.0)),
                'read_timeout': float(timeout)}

    def make_service_client(self, account: str, kind: str, timeout: float) -> Any:
        """A ``BlobServiceClient`` (``kind='blob'``) or ``DataLakeServiceClient`` (``'dfs'``) for ``account``."""
        if kind == 'blob':
            from azure.storage.blob import BlobServiceClient as Client
        else:
            from azure.storage.filedatalake import DataLakeServiceClient as Client
        kwargs = self.client_kwargs(timeout)
        try:
            if self._connection_string and not self.account_url:
                return Client.from_connection_string(self._connection_string, **kwargs)
            return Client(self.service_url(account, kind), credential=self._credential(account), **kwargs)
        except ValueError as err:
            raise PermanentStorageError(f'Cannot configure the {self.scheme} client for account {account!r}: '
                                        f'{err}') from None

    def _credential(self, account: str) -> Any:
        if self._connection_string:
            fields = _connection_string_fields(self._connection_string)
            if fields.get('accountkey'):
                return {'account_name': fields.get('accountname', account), 'account_key': fields['accountkey']}
            return fields.get('sharedaccesssignature')
        if self._key:
            return {'account_name': account, 'account_key': self._key}
        if self._sas:
            return self._sas
        if self.credential_kind == 'anonymous':
            return None
        if self.credential_kind == 'cli':
            from azure.identity import AzureCliCredential
            return AzureCliCredential()
        from azure.identity import DefaultAzureCredential
        return DefaultAzureCredential()


def _account_of_url(url: str | None) -> str | None:
    """The account an endpoint URL names: ``acct.blob.core.windows.net`` or Azurite's ``host:port/acct``."""
    if not url:
        return None
    parsed = urlparse(url)
    host = parsed.hostname or ''
    if '.blob.' in host or '.dfs.' in host:
        return host.split('.')[0]
    first = parsed.path.strip('/').split('/')[0]
    return first or None


def translate(err: BaseException, url: str, action: str) -> BaseException:
    """Map azure-core / azure-identity errors onto the core's storage errors (first message line only)."""
    from azure.core import exceptions as aex
    shown = redact_url(url)
    if isinstance(err, (StorageError, *LOCAL_FILE_ERRORS)):  # ours, or a local file problem: as is
        return err
    message = (str(getattr(err, 'message', '') or err).strip().splitlines() or [''])[0]
    code = getattr(err, 'error_code', None)
    code = getattr(code, 'value', code)
    status = getattr(getattr(err, 'response', None), 'status_code', None) or getattr(err, 'status_code', None)
    detail = f'{code}: {message}' if code else message
    if isinstance(err, aex.ResourceNotFoundError) or status == 404:
        if code in ('ContainerNotFound', 'FilesystemNotFound'):
            return RemoteNotFoundError(f'{action} of {shown} failed: the container does not exist ({detail}).')
        return RemoteNotFoundError(f'Remote object not found: {shown} ({detail}).')
    if isinstance(err, aex.ClientAuthenticationError) or status in (401, 403):
        return PermanentStorageError(f'{action} of {shown} was denied (HTTP {status}, {detail}): check the account '
                                     f'key, SAS token, connection string or Azure login, and the container access.')
    if isinstance(err, aex.HttpResponseError) and status is not None and 400 <= status < 500 \
            and status not in (408, 409, 429):
        return PermanentStorageError(f'{action} of {shown} was rejected (HTTP {status}, {detail}).')
    if isinstance(err, aex.HttpResponseError) and status is not None:
        return StorageError(f'{action} of {shown} failed with a transient error (HTTP {status}, {detail}).')
    return StorageError(f'{action} of {shown} failed: {type(err).__name__}: {message}')


def stat_of(etag: Any, size: Any, modified: Any) -> dict[str, Any]:
    """The core's ``{'etag', 'size', 'mtime'}`` of a blob or file (Azure changes the etag on every write)."""
    return {'etag': etag, 'size': size, 'mtime': modified.isoformat() if modified is not None else None}
