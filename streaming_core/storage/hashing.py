"""Hash names resolved through the hash registry, and hashing a whole local file."""

from __future__ import annotations

import mmap
import os

from streaming_core.errors import UnknownNameError
from streaming_core.machinery.lookup import get_registry
from streaming_core.machinery.protocols import Hasher

__all__ = ['UnknownHashError', 'get_hash', 'get_hashes', 'is_hash', 'hash_file_data', 'hash_file', 'HASH_PREFERENCE']


class UnknownHashError(UnknownNameError, ValueError):
    """The hash algorithm is not registered (a ``ValueError`` too, as the reference raised).

    Attributes:
        hint: The registry's explanation without its headline (a close match, the installed names, what to
            install), so a caller that words its own headline does not repeat it.
    """

    hint: str = ''


def get_hash(name: str) -> Hasher:
    """The hasher registered under ``name``.

    Raises:
        ValueError: ``name`` is empty or not a string.
        UnknownHashError: no plugin registered ``name`` (a ``ValueError`` and a ``LookupError``); the message says
            it once: ``Invalid hash: NAME is not a supported hash algorithm.``, then the close match, the installed
            names and the install hint.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f'Invalid hash: {name!r}. Expected a hash name such as "sha1" or "xxh3_64".')
    try:
        return get_registry('hash').get(name)
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]  # the registry's headline says what this one says
        error = UnknownHashError('\n'.join(filter(None, [f'Invalid hash: {name} is not a supported hash algorithm.',
                                                         hint])))
        error.hint = hint
        raise error from None


def get_hashes() -> set[str]:
    """Every registered hash name."""
    return set(get_registry('hash').names())


#: The order in which a file's recorded hashes are checked, the cheapest first (a download after the remote index
#: changed, a local copy of unknown provenance): the first of these the index records.
HASH_PREFERENCE = ('xxh3_64', 'xxh64', 'xxh128', 'xxh3_128', 'md5', 'sha1', 'sha256', 'sha512', 'blake2b',
                   'sha3_256', 'sha3_512', 'xxh32')


def is_hash(name: str) -> bool:
    """Whether ``name`` is a registered hash."""
    return isinstance(name, str) and name in get_registry('hash')


def hash_file_data(names: list[str], data: bytes | memoryview) -> dict[str, str]:
    """``{name: hex digest}`` of ``data`` for each name."""
    return {name: get_hash(name)(data) for name in names}


def hash_file(name: str, path: str) -> str:
    """The hex digest of a local file's whole content (memory-mapped, so the file is not copied into memory).

    Raises:
        UnknownHashError: ``name`` is not registered.
        OSError: the file cannot be read.
    """
    hasher = get_hash(name)
    with open(path, 'rb') as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return hasher(b'')
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return hasher(view)
            finally:
                view.release()
