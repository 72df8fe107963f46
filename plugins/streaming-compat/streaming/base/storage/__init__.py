"""``streaming.base.storage``: the reference's uploader and downloader classes over streaming-core's storage."""

from __future__ import annotations

from streaming.base.storage.download import (
    AlipanDownloader,
    AzureDataLakeDownloader,
    AzureDownloader,
    CloudDownloader,
    DatabricksUnityCatalogDownloader,
    DBFSDownloader,
    GCSDownloader,
    HFDownloader,
    LocalDownloader,
    OCIDownloader,
    S3Downloader,
    SFTPDownloader,
)
from streaming.base.storage.upload import (
    AlipanUploader,
    AzureDataLakeUploader,
    AzureUploader,
    CloudUploader,
    DatabricksUnityCatalogUploader,
    DBFSUploader,
    GCSUploader,
    HFUploader,
    LocalUploader,
    OCIUploader,
    S3Uploader,
)

__all__ = ['CloudUploader', 'S3Uploader', 'GCSUploader', 'OCIUploader', 'LocalUploader', 'AzureUploader',
           'AzureDataLakeUploader', 'HFUploader', 'DatabricksUnityCatalogUploader', 'DBFSUploader', 'AlipanUploader',
           'CloudDownloader', 'S3Downloader', 'SFTPDownloader', 'GCSDownloader', 'OCIDownloader', 'AzureDownloader',
           'AzureDataLakeDownloader', 'HFDownloader', 'DatabricksUnityCatalogDownloader', 'DBFSDownloader',
           'AlipanDownloader', 'LocalDownloader']
