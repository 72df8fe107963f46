"""Hook implementations of streaming-azure: storage ``azure`` (Blob) and ``azure-dl`` (Data Lake Gen2)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _blob_backend(**options: object) -> object:
    """Create an :class:`~streaming_azure.blob.AzureBlobBackend` (the SDK is imported on its first request)."""
    from streaming_azure.blob import AzureBlobBackend
    return AzureBlobBackend(**options)


def _datalake_backend(**options: object) -> object:
    """Create an :class:`~streaming_azure.datalake.AzureDataLakeBackend`."""
    from streaming_azure.datalake import AzureDataLakeBackend
    return AzureDataLakeBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``azure`` and ``azure-dl``."""
    registry.add('azure', _blob_backend)
    registry.add('azure-dl', _datalake_backend)
