"""The ``azure://`` storage backend (Azure Blob Storage) on azure-storage-blob.

See :mod:`streaming_azure.urls` for the URL forms and :mod:`streaming_azure.config` for credentials and
endpoints. Service clients are created lazily per process, account and timeout, never pickled, and rebuilt when
the core calls :meth:`AzureBlobBackend.reset` between retries. The SDK's retries are off (``retry_total=0``) so
that the core's policy governs; every request carries a timeout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from streaming_azure.config import AzureSettings, stat_of, translate
from streaming_azure.urls import AzureLocation, parse_blob_url
from streaming_core.plugin_api import (
    ClientCache,
    ProcessLocal,
    TruncatedDownloadError,
    check_content_range,
    redact_url,
)

__all__ = ['AzureBlobBackend', 'AzureBackendBase']

T = TypeVar('T')


class AzureBackendBase(ProcessLocal):
    """Client caching, pickling and error translation shared by the Blob and Data Lake backends."""

    scheme = ''
    service_kind = ''

    def __init__(self, **options: Any) -> None:
        self.settings = AzureSettings(self.scheme, dict(options))
        self._init_runtime()

    _process_local = ('_clients',)

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._clients: ClientCache[Any] = ClientCache()

    def __repr__(self) -> str:
        return f'{type(self).__name__}(account={self.settings.account!r}, account_url={self.settings.account_url!r})'

    def reset(self) -> None:
        """Drop every client (the core calls this between retries)."""
        self._clients.clear()

    def _service(self, account: str, timeout: float) -> Any:
        self._check_process()
        return self._clients.get((account, float(timeout)), lambda: self._make_service(account, timeout))

    def _make_service(self, account: str, timeout: float) -> Any:
        from streaming_core.plugin_api import install_log_redaction, register_secret
        client = self.settings.make_service_client(account, self.service_kind, timeout)
        for secret in self.settings.secrets():
            register_secret(secret)
        install_log_redaction('azure', 'urllib3')
        return client

    def _run(self, url: str, action: str, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except Exception as err:
            raise translate(err, url, action) from None

    def _read_range(self, url: str, start: int, length: int, download: Callable[..., Any]) -> bytes:
        """``download(offset=, length=)`` (a blob's or a file's): the bytes that exist in the range (none past the
        end, where Azure answers 416); an answer for another range (its ``Content-Range``) is retryable."""
        if length <= 0:
            return b''

        def operation() -> bytes:
            from azure.core.exceptions import HttpResponseError
            answers: list[str | None] = []  # the answers' own Content-Range (the SDK's properties echo the request)
            try:
                stream = download(offset=start, length=length, max_concurrency=1, raw_response_hook=lambda r:
                                  answers.append(r.http_response.headers.get('Content-Range')))
            except HttpResponseError as err:
                if getattr(err, 'status_code', None) == 416:
                    return b''
                raise
            data = stream.readall()
            what = f'Ranged read of {redact_url(url)}'
            if len(answers) == 1:
                check_content_range(answers[0], start, start + length - 1, len(data), what)
            else:  # a range beyond the SDK's single-request size (32 MiB), read in several requests: the first answer
                first = answers[0] if answers else None  # must be its own range from the first byte asked
                count = _range_length(first) or 0
                check_content_range(first, start, start + max(count, 1) - 1, count, what)
            return data

        return self._run(url, 'Ranged read', operation)


def _range_length(header: str | None) -> int | None:
    """The length of the range a ``Content-Range`` names (``None`` when it names none)."""
    first, _, rest = (header or '').removeprefix('bytes ').partition('-')
    last = rest.partition('/')[0]
    return int(last) - int(first) + 1 if first.strip().isdigit() and last.strip().isdigit() else None


class AzureBlobBackend(AzureBackendBase):
    """``azure://`` storage through azure-storage-blob.

    Options (all optional): ``account``, ``account_key``, ``connection_string``, ``sas_token``, ``account_url``
    (alias ``endpoint``), ``endpoint_suffix``, ``credential`` (``'default'``, ``'cli'``, ``'anonymous'``),
    ``url_form`` (``'auto'``, ``'container'``, ``'account'``), ``connect_timeout``.
    """

    scheme = 'azure'
    service_kind = 'blob'

    def _locate(self, url: str, need_path: bool) -> tuple[AzureLocation, str]:
        location = parse_blob_url(url, account=self.settings.account, url_form=self.settings.url_form,
                                  need_path=need_path)
        return location, self.settings.check_account(location.account, url)

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Download the blob into ``path``; fewer bytes than the blob's size is a truncated download."""
        location, account = self._locate(url, True)

        def operation() -> None:
            blob = self._service(account, timeout).get_blob_client(location.container, location.path)
            stream = blob.download_blob(timeout=max(int(timeout), 1), max_concurrency=1)
            with open(path, 'wb') as out:
                written = stream.readinto(out)
            if stream.size is not None and written != stream.size:
                raise TruncatedDownloadError(f'Download of {redact_url(url)} gave {written} of {stream.size} bytes.')

        self._run(url, 'Download', operation)

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """Bytes ``start`` to ``start + length - 1`` of the blob in one ranged GET (fewer at its end, none past it)."""
        location, account = self._locate(url, True)
        return self._read_range(url, start, length, lambda **kwargs: self._service(account, timeout).get_blob_client(
            location.container, location.path).download_blob(timeout=max(int(timeout), 1), **kwargs))

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` as a block blob, overwriting."""
        location, account = self._locate(url, True)
        size = os.path.getsize(path)

        def operation() -> None:
            blob = self._service(account, timeout).get_blob_client(location.container, location.path)
            with open(path, 'rb') as data:
                blob.upload_blob(data, overwrite=True, length=size, timeout=max(int(timeout), 1), max_concurrency=1)

        self._run(url, 'Upload', operation)

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether the blob exists (``False`` also when its container does not)."""
        location, account = self._locate(url, True)
        return self._run(url, 'Existence check', lambda: bool(
            self._service(account, timeout).get_blob_client(location.container, location.path)
            .exists(timeout=max(int(timeout), 1))))

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size', 'mtime'}`` of the blob, from its properties (a missing blob raises
        :class:`~streaming_core.plugin_api.RemoteNotFoundError` through the translation)."""
        location, account = self._locate(url, True)

        def operation() -> dict[str, Any]:
            props = self._service(account, timeout).get_blob_client(location.container, location.path) \
                .get_blob_properties(timeout=max(int(timeout), 1))
            return stat_of(props.etag, props.size, props.last_modified)

        return self._run(url, 'Stat', operation)

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every blob under the URL's path with its etag, size and modification time (one listing)."""
        location, account = self._locate(url, False)

        def operation() -> list[tuple[str, dict[str, Any]]]:
            container = self._service(account, timeout).get_container_client(location.container)
            blobs = container.list_blobs(name_starts_with=location.path or None, timeout=max(int(timeout), 1))
            return sorted((location.base + blob.name, stat_of(blob.etag, blob.size, blob.last_modified))
                          for blob in blobs)

        return self._run(url, 'Listing', operation)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every blob whose name starts with the URL's path, as URLs in the same form as ``url``, sorted."""
        location, account = self._locate(url, False)

        def operation() -> list[str]:
            container = self._service(account, timeout).get_container_client(location.container)
            blobs = container.list_blobs(name_starts_with=location.path or None, timeout=max(int(timeout), 1))
            return sorted(location.base + blob.name for blob in blobs)

        return self._run(url, 'Listing', operation)
