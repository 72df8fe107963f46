"""Azure Blob Storage and Data Lake Gen2 for streaming-core: the ``azure://`` and ``azure-dl://`` schemes."""

from __future__ import annotations

__all__ = ['AzureBlobBackend', 'AzureDataLakeBackend']


def __getattr__(name: str) -> object:
    if name == 'AzureBlobBackend':
        from streaming_azure.blob import AzureBlobBackend
        return AzureBlobBackend
    if name == 'AzureDataLakeBackend':
        from streaming_azure.datalake import AzureDataLakeBackend
        return AzureDataLakeBackend
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
