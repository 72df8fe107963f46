"""SFTP storage for streaming-core: ``sftp://[user[:password]@]host[:port]/absolute/path`` on paramiko."""

from __future__ import annotations

__all__ = ['SftpBackend', 'SftpUrl', 'parse_sftp_url']


def __getattr__(name: str) -> object:
    if name == 'SftpBackend':
        from streaming_sftp import backend
        return backend.SftpBackend
    if name in ('SftpUrl', 'parse_sftp_url'):
        from streaming_sftp import urls
        return getattr(urls, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
