"""``streaming.base.compression``: the reference's compression helpers and compressor classes over
streaming-core's compressor registry (the codecs themselves are streaming-core's and its plugins').

Differences from the reference, on purpose: a compression string is validated whole before anything is decompressed
(``decompress('gz:99', data)`` is refused, like ``compress``), and ``None`` passes data through in both directions.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from streaming_core.storage import compression as _core

__all__ = ['Compression', 'LevelledCompression', 'Brotli', 'Bzip2', 'Gzip', 'Snappy', 'Zstandard', 'compress',
           'decompress', 'get_compression_extension', 'get_compressions', 'is_compression']


def _require_bytes(data: Any, what: str) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f'{what} expects bytes, got {type(data).__name__}.')


class Compression:
    """One compression family at one level (``extension`` names the family)."""

    extension: str = ''
    levels: list[int] = []
    level: int | None = None

    @classmethod
    def each(cls) -> Iterator[tuple[str, 'Compression']]:
        """Every compression string of this family with its instance (``'br'``, ``'br:0'`` ... ``'br:11'``)."""
        yield cls.extension, cls()
        for level in cls.levels:
            yield f'{cls.extension}:{level}', cls(level)  # type: ignore[call-arg]

    def compress(self, data: bytes) -> bytes:
        """Compress ``data`` at this level."""
        _require_bytes(data, f'{type(self).__name__}.compress')
        return _core.get_compressor(self.extension).compress(data, self.level)

    def decompress(self, data: bytes) -> bytes:
        """Decompress ``data``."""
        _require_bytes(data, f'{type(self).__name__}.decompress')
        return _core.get_compressor(self.extension).decompress(data)


class LevelledCompression(Compression):
    """A family with levels.

    Args:
        level: The level (default: the family's default level).
    """

    default_level: int = 0

    def __init__(self, level: int | None = None) -> None:
        level = self.default_level if level is None else level
        if level not in self.levels:
            raise ValueError(f'Invalid compression level for {self.extension}: {level!r}; valid levels are '
                             f'{self.levels[0]}-{self.levels[-1]}.')
        self.level = level


class Brotli(LevelledCompression):
    """Brotli (``br``), levels 0-11, default 11."""

    extension = 'br'
    levels = list(range(12))
    default_level = 11


class Bzip2(LevelledCompression):
    """bzip2 (``bz2``), levels 1-9, default 9."""

    extension = 'bz2'
    levels = list(range(1, 10))
    default_level = 9


class Gzip(LevelledCompression):
    """gzip (``gz``), levels 0-9, default 9."""

    extension = 'gz'
    levels = list(range(10))
    default_level = 9


class Snappy(Compression):
    """Snappy (``snappy``, the raw block format), no levels."""

    extension = 'snappy'
    levels: list[int] = []

    @classmethod
    def each(cls) -> Iterator[tuple[str, Compression]]:
        """Just ``'snappy'``."""
        yield cls.extension, cls()


class Zstandard(LevelledCompression):
    """Zstandard (``zstd``), levels 1-22, default 3."""

    extension = 'zstd'
    levels = list(range(1, 23))
    default_level = 3


_FAMILIES: dict[str, type[Compression]] = {cls.extension: cls for cls in (Brotli, Bzip2, Gzip, Snappy, Zstandard)}


@functools.lru_cache(maxsize=1)
def _compressions() -> dict[str, Compression]:
    return {name: obj for cls in _FAMILIES.values() for name, obj in cls.each()}


def get_compressions() -> set[str]:
    """Every valid compression string (registered families, with and without a level)."""
    return _core.get_compressions()


def is_compression(algo: str | None) -> bool:
    """Whether ``algo`` is a valid compression string; ``None`` (no compression) counts as valid."""
    return algo is None or _core.is_compression(algo)


def get_compression_extension(algo: str) -> str:
    """The file extension of a compression string (its family)."""
    if not _core.is_compression(algo):
        raise ValueError(f'{algo} is not a supported compression algorithm.')
    return _core.get_compression_extension(algo)


def _check(algo: str) -> None:
    if not _core.is_compression(algo):
        raise ValueError(f'{algo} is not a supported compression algorithm.')


def compress(algo: str | None, data: bytes) -> bytes:
    """Compress ``data`` with ``algo`` (``'zstd:7'``...); ``None`` returns ``data`` unchanged."""
    if algo is None:
        return data
    _check(algo)
    _require_bytes(data, 'compress')
    return _core.compress(algo, data)


def decompress(algo: str | None, data: bytes) -> bytes:
    """Decompress ``data`` compressed with ``algo``; ``None`` returns ``data`` unchanged. The whole string is
    validated first, so an invalid level (``'gz:99'``) is refused before any data is read."""
    if algo is None:
        return data
    _check(algo)
    _require_bytes(data, 'decompress')
    return _core.decompress(algo, data)


def __getattr__(name: str) -> Any:
    if name == 'compressions':  # {compression string: instance}, built on first use
        return _compressions()
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
