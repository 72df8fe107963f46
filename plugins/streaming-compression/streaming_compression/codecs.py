"""The compressors of streaming-compression: ``zstd``, ``br`` (Brotli), ``snappy`` and ``lz4``.

Formats and levels (the first three byte-compatible with the reference):

* ``zstd``: levels 1-22, default 3. One zstd frame with the content size in its header, no checksum and no
  dictionary. Reading accepts frames without a content size and concatenated frames.
* ``br``: levels 0-11, default 11. A raw Brotli stream.
* ``snappy``: no levels. The raw Snappy block format (a varint of the uncompressed length, then elements), not the
  framing format.
* ``lz4`` (new here): levels 0-16, default 0. The LZ4 frame format with the content size and a content checksum.
  Levels 0-2 are LZ4's fast mode (all equivalent), 3-16 its high-compression mode (higher is smaller and
  slower; 9 is the ``lz4 -9`` CLI default of HC).

Every ``decompress`` is bounded by ``max_size`` (the uncompressed size the index declares): a frame header that
declares more is refused before any allocation, and streamed output stops at ``max_size + 1`` bytes with
:class:`~streaming_core.errors.ShardCorruptError`.

The codec libraries are imported on first use, never at plugin import.
"""

from __future__ import annotations

from typing import Any

from streaming_core.plugin_api import ShardCorruptError, require_bytes

__all__ = ['Zstd', 'Brotli', 'Snappy', 'Lz4']

_CHUNK = 1 << 24


def _too_big(family: str, max_size: int, declared: int | None = None) -> ShardCorruptError:
    what = f'declares {declared} bytes' if declared is not None else 'expands'
    return ShardCorruptError(f'{family} data {what} past the declared size of {max_size} bytes; refusing to '
                             f'decompress it (a corrupt or hostile file).')


class Zstd:
    """Zstandard through the ``zstandard`` package: one frame per file, with its content size."""

    extension = 'zstd'
    levels = range(1, 23)
    default_level = 3

    def __init__(self) -> None:
        self._module: Any = None

    def _zstd(self) -> Any:
        if self._module is None:
            import zstandard
            self._module = zstandard
        return self._module

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress into one frame carrying the content size."""
        data = require_bytes(data, 'zstd')
        zstd = self._zstd()
        level = self.default_level if level is None else level
        return zstd.ZstdCompressor(level=level, write_content_size=True, write_checksum=False).compress(data)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress every frame of ``data``, never producing more than ``max_size`` bytes."""
        data = require_bytes(data, 'zstd')
        zstd = self._zstd()
        try:
            declared = zstd.frame_content_size(data)
        except zstd.ZstdError as err:
            raise ShardCorruptError(f'zstd data is corrupt: {err}') from err
        if declared >= 0 and max_size is not None and declared > max_size:
            raise _too_big('zstd', max_size, declared)
        if declared >= 0:
            # The common case (our writers and the reference's): one frame that states its size. Anything else
            # (trailing frames, a size mismatch) goes through the bounded streaming path below.
            try:
                out = zstd.ZstdDecompressor().decompress(data, allow_extra_data=False)
                if len(out) == declared:
                    return out
            except zstd.ZstdError:
                pass
        try:
            return self._stream(zstd, data, max_size)
        except zstd.ZstdError as err:
            raise ShardCorruptError(f'zstd data is corrupt or truncated: {err}') from err

    @staticmethod
    def _stream(zstd: Any, data: bytes | memoryview, max_size: int | None) -> bytes:
        """Decode frame after frame, feeding little enough input at a time that the output can overshoot the
        remaining room by at most a few bytes (zstd expands at most ~32768x), and require every frame to end.
        """
        view = memoryview(data).cast('B')
        out = bytearray()
        pos = 0
        while pos < len(view):
            obj = zstd.ZstdDecompressor().decompressobj()
            while not obj.eof:
                if pos >= len(view):
                    raise ShardCorruptError('zstd data is truncated (a frame ends before its last block).')
                room = _CHUNK if max_size is None else max_size + 1 - len(out)
                step = max(16, min(1 << 16, room >> 15))
                chunk = view[pos:pos + step]
                pos += len(chunk)
                out += obj.decompress(chunk)
                if max_size is not None and len(out) > max_size:
                    raise _too_big('zstd', max_size)
            pos -= len(obj.unused_data)
        return bytes(out)


class Brotli:
    """A raw Brotli stream through the ``brotli`` package."""

    extension = 'br'
    levels = range(0, 12)
    default_level = 11

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress at quality ``level`` (0-11)."""
        import brotli
        return brotli.compress(bytes(require_bytes(data, 'br')), quality=self.default_level if level is None else level)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress, never producing more than ``max_size`` bytes."""
        import brotli
        decompressor = brotli.Decompressor()
        out = bytearray()
        pending: bytes = bytes(require_bytes(data, 'br'))
        try:
            while True:
                room = _CHUNK if max_size is None else min(_CHUNK, max_size + 1 - len(out))
                out += decompressor.process(pending, output_buffer_limit=room)
                pending = b''
                if max_size is not None and len(out) > max_size:
                    raise _too_big('br', max_size)
                if decompressor.is_finished():
                    break
                if decompressor.can_accept_more_data():
                    raise ShardCorruptError('br data is truncated (the stream ends before its last block).')
        except brotli.error as err:
            raise ShardCorruptError(f'br data is corrupt: {err}') from err
        return bytes(out)


def _varint(data: bytes | memoryview) -> int:
    """The uncompressed length at the start of a raw Snappy block."""
    value = shift = 0
    for i in range(min(len(data), 5)):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
    raise ShardCorruptError('snappy data is corrupt: its length header is not a valid varint.')


class Snappy:
    """The raw Snappy block format through ``cramjam`` (no levels)."""

    extension = 'snappy'
    levels: range = range(0)
    default_level = None

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress into one raw block."""
        import cramjam
        return bytes(cramjam.snappy.compress_raw(bytes(require_bytes(data, 'snappy'))))

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress a raw block after checking its declared length against ``max_size``."""
        import cramjam
        data = require_bytes(data, 'snappy')
        declared = _varint(data)
        if max_size is not None and declared > max_size:
            raise _too_big('snappy', max_size, declared)
        try:
            return bytes(cramjam.snappy.decompress_raw(bytes(data)))
        except Exception as err:  # cramjam raises its own DecompressionError
            raise ShardCorruptError(f'snappy data is corrupt: {err}') from err


class Lz4:
    """The LZ4 frame format through the ``lz4`` package."""

    extension = 'lz4'
    levels = range(0, 17)
    default_level = 0

    def compress(self, data: bytes | memoryview, level: int | None) -> bytes:
        """Compress into one frame with the content size and a content checksum."""
        import lz4.frame
        level = self.default_level if level is None else level
        return lz4.frame.compress(require_bytes(data, 'lz4'), compression_level=level, store_size=True,
                                  content_checksum=True)

    def decompress(self, data: bytes | memoryview, max_size: int | None = None) -> bytes:
        """Decompress every frame of ``data``, never producing more than ``max_size`` bytes."""
        import lz4.frame
        out = bytearray()
        pending = bytes(require_bytes(data, 'lz4'))
        if not pending:
            raise ShardCorruptError('lz4 data is empty; expected at least one frame.')
        try:
            while pending:
                info = lz4.frame.get_frame_info(pending)
                declared = info.get('content_size') or 0
                if max_size is not None and declared > max_size - len(out):
                    raise _too_big('lz4', max_size, declared + len(out))
                decompressor = lz4.frame.LZ4FrameDecompressor()
                chunk_input = pending
                while True:
                    room = _CHUNK if max_size is None else min(_CHUNK, max_size + 1 - len(out))
                    out += decompressor.decompress(chunk_input, max_length=room)
                    chunk_input = b''
                    if max_size is not None and len(out) > max_size:
                        raise _too_big('lz4', max_size)
                    if decompressor.eof:
                        break
                    if decompressor.needs_input:
                        raise ShardCorruptError('lz4 data is truncated (the frame ends before its end mark).')
                pending = decompressor.unused_data
        except RuntimeError as err:
            raise ShardCorruptError(f'lz4 data is corrupt: {err}') from err
        return bytes(out)
