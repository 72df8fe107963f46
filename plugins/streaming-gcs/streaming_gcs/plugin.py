"""Hook implementations of streaming-gcs: storage ``gs`` (Google Cloud Storage)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _gcs_backend(**options: object) -> object:
    """Create a :class:`~streaming_gcs.backend.GcsBackend` (the Google SDK is imported on its first request)."""
    from streaming_gcs.backend import GcsBackend
    return GcsBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``gs``."""
    registry.add('gs', _gcs_backend)
