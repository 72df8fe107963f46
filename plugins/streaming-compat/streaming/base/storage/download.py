"""``streaming.base.storage.download``: the reference's downloaders as facades over streaming-core's storage.

``CloudDownloader.get(remote)`` returns the provider class for the URL's scheme; every download goes through
:func:`streaming_core.storage.facade.download_file` (a unique temporary name and an atomic rename, the backend of the
storage plugin registered for the scheme, its credentials and environment variables).
"""

from __future__ import annotations

import os
from typing import Any

from streaming.base.storage.providers import check_available, reference_scheme
from streaming_core.storage import facade as _storage

__all__ = ['CloudDownloader', 'S3Downloader', 'SFTPDownloader', 'GCSDownloader', 'OCIDownloader', 'AzureDownloader',
           'AzureDataLakeDownloader', 'HFDownloader', 'DatabricksUnityCatalogDownloader', 'DBFSDownloader',
           'AlipanDownloader', 'LocalDownloader']


class CloudDownloader:
    """Downloads files from one kind of remote (the subclass names the scheme in ``_client_identifier``)."""

    _client_identifier: str = ''

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        check_available(self._client_identifier, None, type(self).__name__)
        self.options = dict(options or {})

    @staticmethod
    def get(remote_dir: str | None = None) -> 'CloudDownloader':
        """The downloader for ``remote_dir``'s scheme (a :class:`LocalDownloader` for ``None`` or a local path).

        Raises:
            ValueError: an unsupported scheme (``'Unsupported remote path: ...'``).
            NotImplementedError: ``alipan://``, or a provider whose storage plugin is not installed.
        """
        key = reference_scheme(remote_dir)
        check_available(key, remote_dir, 'CloudDownloader')
        cls = _DOWNLOADERS.get(key, CloudDownloader)
        downloader = cls.__new__(cls)
        downloader.options = {}
        if cls is CloudDownloader:
            downloader._client_identifier = key  # a scheme some other storage plugin registers
        return downloader

    def download(self, remote: str | None, local: str, timeout: float = 60.0) -> None:
        """Download ``remote`` to ``local`` unless ``local`` already exists.

        Raises:
            ValueError: ``remote`` is empty (and ``local`` is absent), or of another scheme than this downloader's.
        """
        if os.path.exists(local):
            return
        if not remote:
            raise ValueError('In the absence of local dataset, path to remote dataset must be provided')
        key = reference_scheme(remote)
        if key != self._client_identifier:
            raise ValueError(f'Expected remote path to start with url scheme of {self._client_identifier!r}, got '
                             f'{remote!r}.')
        _storage.download_file(remote, local, timeout=timeout, retries=0, options=self.options or None)

    def clean_up(self) -> None:
        """Nothing to release: streaming-core's backends manage their own clients."""

    @classmethod
    def direct_download(cls, remote: str | None, local: str, timeout: float = 60.0) -> None:
        """``get(remote).download(remote, local, timeout)``, then ``clean_up()``."""
        downloader = CloudDownloader.get(remote)
        try:
            downloader.download(remote, local, timeout)
        finally:
            downloader.clean_up()


class S3Downloader(CloudDownloader):
    """``s3://bucket/key`` (``S3_ENDPOINT_URL`` and the AWS environment as in the reference)."""

    _client_identifier = 's3'


class SFTPDownloader(CloudDownloader):
    """``sftp://[user[:password]@]host[:port]/path`` (needs the ``streaming-sftp`` plugin)."""

    _client_identifier = 'sftp'


class GCSDownloader(CloudDownloader):
    """``gs://bucket/key`` (HMAC keys ``GCS_KEY``/``GCS_SECRET`` or application default credentials)."""

    _client_identifier = 'gs'


class OCIDownloader(CloudDownloader):
    """``oci://bucket[@namespace]/key`` (``~/.oci/config``)."""

    _client_identifier = 'oci'


class AzureDownloader(CloudDownloader):
    """``azure://...`` Blob Storage (``AZURE_ACCOUNT_NAME``/``AZURE_ACCOUNT_ACCESS_KEY``)."""

    _client_identifier = 'azure'


class AzureDataLakeDownloader(CloudDownloader):
    """``azure-dl://filesystem/path`` (Data Lake Storage Gen2)."""

    _client_identifier = 'azure-dl'


class HFDownloader(CloudDownloader):
    """``hf://datasets/org/repo/path`` (needs the ``streaming-hf`` plugin)."""

    _client_identifier = 'hf'


class DatabricksUnityCatalogDownloader(CloudDownloader):
    """``dbfs:/Volumes/...`` (needs the ``streaming-databricks`` plugin)."""

    _client_identifier = 'dbfs-uc'


class DBFSDownloader(CloudDownloader):
    """``dbfs:/...`` (needs the ``streaming-databricks`` plugin)."""

    _client_identifier = 'dbfs'


class AlipanDownloader(CloudDownloader):
    """``alipan://``: not supported by streaming-compat (constructing one raises ``NotImplementedError``)."""

    _client_identifier = 'alipan'


class LocalDownloader(CloudDownloader):
    """A local path (copied, then renamed into place)."""

    _client_identifier = ''


_DOWNLOADERS: dict[str, type[CloudDownloader]] = {
    cls._client_identifier: cls for cls in (S3Downloader, SFTPDownloader, GCSDownloader, OCIDownloader,
                                            AzureDownloader, AzureDataLakeDownloader, HFDownloader,
                                            DatabricksUnityCatalogDownloader, DBFSDownloader, AlipanDownloader,
                                            LocalDownloader)}
