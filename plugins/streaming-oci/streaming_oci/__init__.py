"""OCI Object Storage for streaming-core: the ``oci://bucket@namespace/path`` scheme."""

from __future__ import annotations

__all__ = ['OciBackend', 'parse_oci_url']


def __getattr__(name: str) -> object:
    if name in __all__:
        from streaming_oci import backend
        return getattr(backend, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
