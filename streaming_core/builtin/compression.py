"""Builtin compressors from the standard library: ``gz`` (0-9, default 9) and ``bz2`` (1-9, default 9).

Both decompress incrementally, so a file that expands past the size its index declares is refused after producing
at most that many bytes (plus one), and both accept concatenated members/streams as Python's one-shot functions
do.
"""

from __future__ import annotations

import bz2
import gzip
import zlib
from collections.abc import Callable

from streaming_core.errors import ShardCorruptError
from streaming_core.plugin_api import RegistryView, hookimpl

__all__ = ['Gzip', 'Bzip2', 'bounded_stream', 'require_bytes', 'expansion_error']

_CHUNK = 1 << 24


def require_bytes(data: object, family: str) -> memoryview:
    """``data`` as a byte view; anything that is not bytes-like raises ``TypeError`` (as the reference does)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f'{family} compresses bytes-like data, got {type(data).__name__}.')
    return memoryview(data)


def expansion_error(family: str, max_size: int, declared: int | None = None) -> ShardCorruptError:
    """The error for ``family`` data that expands past ``max_size`` bytes (or whose header ``declared`` more)."""
    if declared is not None:
        return ShardCorruptError(f'{family} data declares {declared} bytes, more than the declared size of {max_size} '
                                 f'bytes; refusing to decompress it (a corrupt or hostile file).')
    return ShardCorruptError(f'{family} data expands past the declared size of {max_size} bytes; refusing to '
                             f'decompress further (a corrupt or hostile file).')


_too_big = expansion_error


def bounded_stream(make: Callable[[], 'zlib._Decompress | bz2.BZ2Decompressor'], data: bytes | memoryview,
                   max_size: int | None, family: str) -> bytes:
    """Decompress ``data`` (one or more concatenated members) with fresh decompressors from ``make``, producing at
    most ``max_size + 1`` bytes before raising :class:`ShardCorruptError`.

    Works with ``zlib`` decompress objects (``unconsumed_tail``/``unused_data``) and ``bz2.BZ2Decompressor``
    (``max_length``/``needs_input``/``unused_data``).
    """
    out = bytearray()
    pending = bytes(data)
    while True:
        decompressor = make()
        is_bz2 = isinstance(decompressor, bz2.BZ2Decompressor)
        tail = pending
        while True:
            room = _CHUNK if max_size is None else min(_CHUNK, max_size + 1 - len(out))
            if is_bz2:
                out += decompressor.decompress(tail, max_length=room)
                tail = b''
            else:
                out += decompressor.decompress(tail, room)
                tail = decompressor.unconsumed_tail
            if max_size is not None and len(out) > max_size:
                raise _too_big(family, max_size)
            if decompressor.eof:
                break
            if is_bz2 and decompressor.needs_input:
                raise ShardCorruptError(f'{family} data is truncated (the stream ends before its end marker).')
            if not is_bz2 and not tail:
                out += decompressor.flush()
                if max_size is not None and len(out) > max_size:
                    raise _too_big(family, max_size)
                if not decompressor.eof:
                    raise ShardCorruptError(f'{family} data is truncated (the stream ends before its end marker).')
                break
        pending = decompressor.unused_data
        if not pending:
            return bytes(out)
        if family == 'gz' and not pending.strip(b'\0'):
            return bytes(out)  # zero padding after the last member, as gzip.decompress accepts


class Gzip:
    """One gzip member, as Python's ``gzip.compress`` writes it (the header's mtime makes the bytes vary)."""

    extension = 'gz'
    levels = range(0, 10)
    default_level = 9

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress at ``level`` (0-9)."""
        return gzip.compress(require_bytes(data, 'gz'), compresslevel=self.default_level if level is None else level)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress one or more gzip members, bounded by ``max_size``."""
        try:
            return bounded_stream(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), require_bytes(data, 'gz'), max_size,
                                  'gz')
        except zlib.error as err:
            raise ShardCorruptError(f'gz data is corrupt: {err}') from err


class Bzip2:
    """Standard bzip2."""

    extension = 'bz2'
    levels = range(1, 10)
    default_level = 9

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress at ``level`` (1-9)."""
        return bz2.compress(require_bytes(data, 'bz2'), compresslevel=self.default_level if level is None else level)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress one or more bzip2 streams, bounded by ``max_size``."""
        try:
            return bounded_stream(bz2.BZ2Decompressor, require_bytes(data, 'bz2'), max_size, 'bz2')
        except ShardCorruptError:
            raise
        except (OSError, ValueError, EOFError) as err:
            raise ShardCorruptError(f'bz2 data is corrupt: {err}') from err


@hookimpl
def register_compressors(registry: RegistryView) -> None:
    """Register ``gz`` and ``bz2``."""
    registry.add('gz', Gzip())
    registry.add('bz2', Bzip2())
