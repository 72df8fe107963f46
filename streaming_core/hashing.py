"""Hash names resolved through the hash registry."""

from __future__ import annotations

from streaming_core.interfaces import Hasher
from streaming_core.registry import get_registry

__all__ = ['get_hash', 'get_hashes', 'is_hash', 'hash_file_data']


def get_hash(name: str) -> Hasher:
    """The hasher registered under ``name``; unknown names raise ``UnknownNameError`` (a ``LookupError``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f'Invalid hash: {name!r}.')
    return get_registry('hash').get(name)


def get_hashes() -> set[str]:
    """Every registered hash name."""
    return set(get_registry('hash').names())


def is_hash(name: str) -> bool:
    """Whether ``name`` is a registered hash."""
    return isinstance(name, str) and name in get_registry('hash')


def hash_file_data(names: list[str], data: bytes | memoryview) -> dict[str, str]:
    """``{name: hex digest}`` of ``data`` for each name."""
    return {name: get_hash(name)(data) for name in names}
