"""Builtin hashes: hashlib's algorithms (no ``shake_*``) and xxhash's, 17 names in all."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import xxhash

from streaming_core.plugin_api import RegistryView, hookimpl

HASHLIB_NAMES = ('md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'sha3_224', 'sha3_256', 'sha3_384',
                 'sha3_512', 'blake2b', 'blake2s')
XXHASH_NAMES = ('xxh32', 'xxh64', 'xxh128', 'xxh3_64', 'xxh3_128')


def _hashlib(name: str) -> Callable[[bytes | memoryview], str]:
    constructor = getattr(hashlib, name)

    def digest(data: bytes | memoryview) -> str:
        return constructor(data).hexdigest()

    digest.__name__ = name
    digest.__doc__ = f'Lowercase hex {name} digest.'
    return digest


def _xxhash(name: str) -> Callable[[bytes | memoryview], str]:
    function = getattr(xxhash, f'{name}_hexdigest')

    def digest(data: bytes | memoryview) -> str:
        return function(data)

    digest.__name__ = name
    digest.__doc__ = f'Lowercase hex {name} digest (seed 0, canonical byte order).'
    return digest


@hookimpl
def register_hashes(registry: RegistryView) -> None:
    """Register the 17 hash names of the reference."""
    for name in HASHLIB_NAMES:
        registry.add(name, _hashlib(name))
    for name in XXHASH_NAMES:
        registry.add(name, _xxhash(name))
