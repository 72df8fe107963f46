"""Hook implementations of streaming-oci: storage ``oci`` (OCI Object Storage)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _oci_backend(**options: object) -> object:
    """Create an :class:`~streaming_oci.backend.OciBackend` (the oci SDK is imported on its first request)."""
    from streaming_oci.backend import OciBackend
    return OciBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``oci``."""
    registry.add('oci', _oci_backend)
