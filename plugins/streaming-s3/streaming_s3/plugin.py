"""Hook implementations of streaming-s3: storage ``s3`` (AWS S3 and S3-compatible stores)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _s3_backend(**options: object) -> object:
    """Create an :class:`~streaming_s3.backend.S3Backend` (boto3 is imported on its first request)."""
    from streaming_s3.backend import S3Backend
    return S3Backend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``s3``."""
    registry.add('s3', _s3_backend)
