"""Hook implementations of streaming-sftp: storage ``sftp`` (SSH File Transfer Protocol, on paramiko)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _sftp_backend(**options: object) -> object:
    """Create a :class:`~streaming_sftp.backend.SftpBackend` (paramiko is imported on first use)."""
    from streaming_sftp.backend import SftpBackend
    return SftpBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``sftp``."""
    registry.add('sftp', _sftp_backend)
