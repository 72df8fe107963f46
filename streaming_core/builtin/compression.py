"""Builtin compressors from the standard library: ``gz`` (0-9, default 9) and ``bz2`` (1-9, default 9).

Both decompress incrementally, so a file that expands past the size its index declares is refused after producing
at most that many bytes (plus one), and both accept concatenated members/streams as Python's one-shot functions
do.
"""

from __future__ import annotations

import bz2
import gzip
import io
import zlib
from collections.abc import Callable
from typing import BinaryIO

from streaming_core.errors import ShardCorruptError
from streaming_core.plugin_api import RegistryView, hookimpl

__all__ = ['Gzip', 'Bzip2', 'bounded_stream', 'stream_members', 'require_bytes', 'expansion_error']

_CHUNK = 1 << 24
#: How much compressed input :func:`stream_members` reads at a time.
_READ = 1 << 20


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
    most ``max_size + 1`` bytes before raising :class:`ShardCorruptError` (:func:`stream_members` in memory).

    Works with ``zlib`` decompress objects (``unconsumed_tail``/``unused_data``) and ``bz2.BZ2Decompressor``
    (``max_length``/``needs_input``/``unused_data``).
    """
    out = io.BytesIO()
    stream_members(make, io.BytesIO(data), out, max_size, family)
    return out.getvalue()


def stream_members(make: Callable[[], 'zlib._Decompress | bz2.BZ2Decompressor'], src: BinaryIO, dst: BinaryIO,
                   max_size: int | None, family: str) -> int:
    """Decompress the file ``src`` (one or more concatenated members) into ``dst`` a chunk at a time, in bounded
    memory, writing at most ``max_size + 1`` bytes before raising :class:`ShardCorruptError`; returns the bytes
    written. Zero bytes after the last gzip member are accepted as padding, as ``gzip.decompress`` does.
    """
    written = 0
    decompressor = make()
    is_bz2 = isinstance(decompressor, bz2.BZ2Decompressor)
    pending = b''
    while True:
        if decompressor.eof:
            rest = decompressor.unused_data + pending
            pending = b''
            if not rest:
                rest = src.read(_READ)
                if not rest:
                    return written
            if family == 'gz' and not rest.strip(b'\0'):
                while rest:
                    if rest.strip(b'\0'):
                        raise ShardCorruptError(f'{family} data has bytes after the padding of its last member.')
                    rest = src.read(_READ)
                return written
            decompressor = make()
            pending = rest
        tail = b'' if is_bz2 else decompressor.unconsumed_tail
        if not pending and not tail and (not is_bz2 or decompressor.needs_input):
            pending = src.read(_READ)
            if not pending:
                if not is_bz2:
                    out = decompressor.flush()
                    dst.write(out)
                    written += len(out)
                    if max_size is not None and written > max_size:
                        raise expansion_error(family, max_size)
                    if decompressor.eof:
                        continue
                raise ShardCorruptError(f'{family} data is truncated (the stream ends before its end marker).')
        room = _CHUNK if max_size is None else min(_CHUNK, max_size + 1 - written)
        if is_bz2:
            out = decompressor.decompress(pending, max_length=room)
        else:
            out = decompressor.decompress(pending or tail, room)
        pending = b''
        dst.write(out)
        written += len(out)
        if max_size is not None and written > max_size:
            raise expansion_error(family, max_size)


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

    def decompress_to(self, src: BinaryIO, dst: BinaryIO, max_size: int | None = None) -> int:
        """Decompress the file ``src`` into ``dst`` in bounded memory (bounded by ``max_size``); bytes written."""
        try:
            return stream_members(lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), src, dst, max_size, 'gz')
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

    def decompress_to(self, src: BinaryIO, dst: BinaryIO, max_size: int | None = None) -> int:
        """Decompress the file ``src`` into ``dst`` in bounded memory (bounded by ``max_size``); bytes written."""
        try:
            return stream_members(bz2.BZ2Decompressor, src, dst, max_size, 'bz2')
        except ShardCorruptError:
            raise
        except (OSError, ValueError, EOFError) as err:
            raise ShardCorruptError(f'bz2 data is corrupt: {err}') from err


@hookimpl
def register_compressors(registry: RegistryView) -> None:
    """Register ``gz`` and ``bz2``."""
    registry.add('gz', Gzip())
    registry.add('bz2', Bzip2())
