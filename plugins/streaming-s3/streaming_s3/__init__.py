"""S3 and S3-compatible storage (R2, B2, MinIO, CoreWeave) for streaming-core: the ``s3://`` scheme."""

from __future__ import annotations

__all__ = ['S3Backend']


def __getattr__(name: str) -> object:
    if name == 'S3Backend':
        from streaming_s3.backend import S3Backend
        return S3Backend
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
