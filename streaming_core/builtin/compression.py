"""Builtin compressors from the standard library: ``gz`` (0-9, default 9) and ``bz2`` (1-9, default 9)."""

from __future__ import annotations

import bz2
import gzip
import zlib

from streaming_core.errors import ShardCorruptError
from streaming_core.hookspecs import hookimpl
from streaming_core.registry import RegistryView



def _bounded(decompressor: 'zlib._Decompress | bz2.BZ2Decompressor', data: bytes | memoryview,
             max_size: int | None, family: str) -> bytes:
    """Run an incremental decompressor, never producing more than ``max_size`` bytes."""
    out = bytearray()
    view = memoryview(data)
    if isinstance(decompressor, bz2.BZ2Decompressor):
        pending: bytes | memoryview = view
        while True:
            limit = -1 if max_size is None else max_size + 1 - len(out)
            out += decompressor.decompress(pending, max_length=limit)
            pending = b''
            if max_size is not None and len(out) > max_size:
                raise ShardCorruptError(f'{family} data expands past the declared size of {max_size} bytes.')
            if decompressor.eof or decompressor.needs_input:
                break
        if not decompressor.eof:
            raise ShardCorruptError(f'{family} data is truncated.')
        return bytes(out)
    tail = view
    while True:
        limit = 0 if max_size is None else max_size + 1 - len(out)
        out += decompressor.decompress(tail, limit)
        tail = decompressor.unconsumed_tail
        if max_size is not None and len(out) > max_size:
            raise ShardCorruptError(f'{family} data expands past the declared size of {max_size} bytes.')
        if not tail:
            break
    out += decompressor.flush()
    if max_size is not None and len(out) > max_size:
        raise ShardCorruptError(f'{family} data expands past the declared size of {max_size} bytes.')
    if not decompressor.eof:
        raise ShardCorruptError(f'{family} data is truncated.')
    return bytes(out)


class Gzip:
    """One gzip member, as Python's ``gzip.compress`` writes it."""

    extension = 'gz'
    levels = range(0, 10)
    default_level = 9

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress at ``level`` (0-9)."""
        return gzip.compress(bytes(data), compresslevel=self.default_level if level is None else level)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress one gzip member, bounded by ``max_size``."""
        try:
            return _bounded(zlib.decompressobj(16 + zlib.MAX_WBITS), data, max_size, 'gz')
        except zlib.error as err:
            raise ShardCorruptError(f'gz data is corrupt: {err}') from err


class Bzip2:
    """Standard bzip2."""

    extension = 'bz2'
    levels = range(1, 10)
    default_level = 9

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress at ``level`` (1-9)."""
        return bz2.compress(bytes(data), compresslevel=self.default_level if level is None else level)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress, bounded by ``max_size``."""
        try:
            return _bounded(bz2.BZ2Decompressor(), data, max_size, 'bz2')
        except (OSError, ValueError) as err:
            if isinstance(err, ShardCorruptError):
                raise
            raise ShardCorruptError(f'bz2 data is corrupt: {err}') from err


@hookimpl
def register_compressors(registry: RegistryView) -> None:
    """Register ``gz`` and ``bz2``."""
    registry.add('gz', Gzip())
    registry.add('bz2', Bzip2())
