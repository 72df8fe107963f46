"""Hash names resolved through the hash registry."""

from __future__ import annotations

from streaming_core.errors import UnknownNameError
from streaming_core.interfaces import Hasher
from streaming_core.registry import get_registry

__all__ = ['UnknownHashError', 'get_hash', 'get_hashes', 'is_hash', 'hash_file_data']


class UnknownHashError(UnknownNameError, ValueError):
    """The hash algorithm is not registered (a ``ValueError`` too, as the reference raised)."""


def get_hash(name: str) -> Hasher:
    """The hasher registered under ``name``.

    Raises:
        ValueError: ``name`` is empty or not a string.
        UnknownHashError: no plugin registered ``name`` (a ``ValueError`` and a ``LookupError``).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f'Invalid hash: {name!r}. Expected a hash name such as "sha1" or "xxh3_64".')
    try:
        return get_registry('hash').get(name)
    except UnknownNameError as err:
        raise UnknownHashError(f'Invalid hash: {name!r}.\n{err}') from None


def get_hashes() -> set[str]:
    """Every registered hash name."""
    return set(get_registry('hash').names())


def is_hash(name: str) -> bool:
    """Whether ``name`` is a registered hash."""
    return isinstance(name, str) and name in get_registry('hash')


def hash_file_data(names: list[str], data: bytes | memoryview) -> dict[str, str]:
    """``{name: hex digest}`` of ``data`` for each name."""
    return {name: get_hash(name)(data) for name in names}
