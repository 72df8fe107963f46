"""Hook implementations: a ``rot13`` column codec and an ``xzl`` compressor (zlib, then xor with a key byte)."""

from __future__ import annotations

import codecs
import zlib

from streaming_core.plugin_api import CodecError, ShardCorruptError, hookimpl


class Rot13:
    """Stores text rot13-encoded (UTF-8). Takes no arguments."""

    size = None
    unsafe = False

    def __init__(self, args: str | None = None) -> None:
        if args:
            raise CodecError(f'rot13 takes no arguments, got {args!r}')

    def encode(self, obj: str) -> bytes:
        """Encode a string."""
        if not isinstance(obj, str):
            raise CodecError(f'rot13 encodes str, got {type(obj).__name__}')
        return codecs.encode(obj, 'rot13').encode('utf-8')

    def decode(self, data: bytes | memoryview) -> str:
        """Decode to the original string."""
        return codecs.decode(bytes(data).decode('utf-8'), 'rot13')


class XorZlib:
    """zlib at levels 1-9, then every byte xor 0x5a."""

    extension = 'xzl'
    levels = range(1, 10)
    default_level = 6

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress."""
        packed = zlib.compress(bytes(data), self.default_level if level is None else level)
        return bytes(b ^ 0x5A for b in packed)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress, never past ``max_size`` bytes."""
        packed = bytes(b ^ 0x5A for b in bytes(data))
        decompressor = zlib.decompressobj()
        try:
            out = decompressor.decompress(packed, 0 if max_size is None else max_size + 1)
        except zlib.error as err:
            raise ShardCorruptError(f'xzl data is corrupt: {err}') from err
        if max_size is not None and len(out) > max_size:
            raise ShardCorruptError(f'xzl data expands past {max_size} bytes')
        return out


@hookimpl
def register_codecs(registry):
    """Register ``rot13``."""
    registry.add('rot13', Rot13)


@hookimpl
def register_compressors(registry):
    """Register ``xzl``."""
    registry.add('xzl', XorZlib())
