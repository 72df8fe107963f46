"""The ``azure-dl://`` storage backend (Azure Data Lake Storage Gen2) on azure-storage-file-datalake.

URL: ``azure-dl://<filesystem>/<path>`` on ``https://<account>.dfs.core.windows.net``, or
``azure-dl://<filesystem>@<account>.dfs.core.windows.net/<path>``. The account is the URL's, else the configured
one (``account`` option, connection string, ``$AZURE_ACCOUNT_NAME``), else, as in the reference, the filesystem
name's first dot-component. Credentials and endpoints follow :mod:`streaming_azure.config`.

Downloads and existence checks go through the Blob endpoint (the SDK does so itself); uploads
(create/append/flush) and listings (``get_paths``) use the DFS endpoint.
"""

from __future__ import annotations

import os
from typing import Any

from streaming_azure.blob import AzureBackendBase
from streaming_azure.config import stat_of
from streaming_azure.urls import AzureLocation, parse_datalake_url
from streaming_core.plugin_api import TruncatedDownloadError, redact_url

__all__ = ['AzureDataLakeBackend']


class AzureDataLakeBackend(AzureBackendBase):
    """``azure-dl://`` storage through azure-storage-file-datalake (same options as ``azure://``)."""

    scheme = 'azure-dl'
    service_kind = 'dfs'

    def _locate(self, url: str, need_path: bool) -> tuple[AzureLocation, str]:
        location = parse_datalake_url(url, need_path=need_path)
        named = location.account
        if named is None and not self.settings.account:
            named = location.container.split('.')[0]  # the reference's fallback: the filesystem name
        return location, self.settings.check_account(named, url)

    def _file(self, account: str, location: AzureLocation, timeout: float) -> Any:
        return self._service(account, timeout).get_file_client(location.container, location.path)

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Download the file into ``path``; fewer bytes than its size is a truncated download."""
        location, account = self._locate(url, True)

        def operation() -> None:
            stream = self._file(account, location, timeout).download_file(timeout=max(int(timeout), 1),
                                                                          max_concurrency=1)
            with open(path, 'wb') as out:
                written = stream.readinto(out)
            if stream.size is not None and written != stream.size:
                raise TruncatedDownloadError(f'Download of {redact_url(url)} gave {written} of {stream.size} bytes.')

        self._run(url, 'Download', operation)

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """Bytes ``start`` to ``start + length - 1`` of the file in one ranged GET (fewer at its end, none past it)."""
        location, account = self._locate(url, True)
        return self._read_range(url, start, length, lambda **kwargs: self._file(account, location, timeout)
                                .download_file(timeout=max(int(timeout), 1), **kwargs))

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Upload ``path`` (create, append, flush), overwriting."""
        location, account = self._locate(url, True)
        size = os.path.getsize(path)

        def operation() -> None:
            with open(path, 'rb') as data:
                self._file(account, location, timeout).upload_data(data, overwrite=True, length=size,
                                                                   timeout=max(int(timeout), 1), max_concurrency=1)

        self._run(url, 'Upload', operation)

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether the file exists."""
        location, account = self._locate(url, True)
        return self._run(url, 'Existence check', lambda: bool(
            self._file(account, location, timeout).exists(timeout=max(int(timeout), 1))))

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size', 'mtime'}`` of the file, from its properties (a missing file raises
        :class:`~streaming_core.plugin_api.RemoteNotFoundError` through the translation)."""
        location, account = self._locate(url, True)

        def operation() -> dict[str, Any]:
            props = self._file(account, location, timeout).get_file_properties(timeout=max(int(timeout), 1))
            return stat_of(props.etag, props.size, props.last_modified)

        return self._run(url, 'Stat', operation)

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every file under the URL's path with its etag, size and modification time (one listing)."""
        location, account = self._locate(url, False)
        directory = location.path.rsplit('/', 1)[0] if '/' in location.path else ''

        def operation() -> list[tuple[str, dict[str, Any]]]:
            filesystem = self._service(account, timeout).get_file_system_client(location.container)
            paths = filesystem.get_paths(path=directory or None, recursive=True, timeout=max(int(timeout), 1))
            return sorted((location.base + item.name, stat_of(item.etag, item.content_length, item.last_modified))
                          for item in paths if not item.is_directory and item.name.startswith(location.path))

        return self._run(url, 'Listing', operation)

    def list(self, url: str, *, timeout: float) -> list[str]:
        """Every file whose path starts with the URL's path, as ``azure-dl://`` URLs, sorted."""
        location, account = self._locate(url, False)
        directory = location.path.rsplit('/', 1)[0] if '/' in location.path else ''

        def operation() -> list[str]:
            filesystem = self._service(account, timeout).get_file_system_client(location.container)
            paths = filesystem.get_paths(path=directory or None, recursive=True, timeout=max(int(timeout), 1))
            return sorted(location.base + item.name for item in paths
                          if not item.is_directory and item.name.startswith(location.path))

        return self._run(url, 'Listing', operation)
