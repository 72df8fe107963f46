"""Hook implementations of streaming-databricks: storage ``dbfs`` (Unity Catalog Volumes and DBFS)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _dbfs_backend(**options: object) -> object:
    """Create a :class:`~streaming_databricks.backend.DatabricksBackend` (the SDK is imported on first use)."""
    from streaming_databricks.backend import DatabricksBackend
    return DatabricksBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``dbfs`` (``dbfs:/Volumes/...`` through the Files API, ``dbfs:/...`` through DBFS)."""
    registry.add('dbfs', _dbfs_backend)
