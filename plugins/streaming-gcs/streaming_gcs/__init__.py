"""Google Cloud Storage for streaming-core: the ``gs://`` scheme (ADC, service accounts, HMAC, emulators)."""

from __future__ import annotations

__all__ = ['GcsBackend']


def __getattr__(name: str) -> object:
    if name == 'GcsBackend':
        from streaming_gcs.backend import GcsBackend
        return GcsBackend
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
