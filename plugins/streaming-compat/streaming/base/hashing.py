"""``streaming.base.hashing``: the reference's hash helpers over streaming-core's hash registry."""

from __future__ import annotations

from streaming_core.storage import hashing as _core

__all__ = ['get_hash', 'get_hashes', 'is_hash']


def get_hashes() -> set[str]:
    """Every supported hash algorithm name."""
    return _core.get_hashes()


def is_hash(algo: str) -> bool:
    """Whether ``algo`` is a supported hash algorithm."""
    return _core.is_hash(algo)


def get_hash(algo: str, data: bytes) -> str:
    """The lowercase hex digest of ``data`` with ``algo`` (``ValueError`` for an unsupported name)."""
    return _core.get_hash(algo)(data)
