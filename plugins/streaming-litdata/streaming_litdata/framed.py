"""litdata's in-file zstd chunk layouts (``optimize(..., compression='zstd')``, litdata 0.2.76).

``compression_level='batch'`` (the default with zstd) writes a *framed* chunk::

    b'LDFZ01' + two NUL bytes   magic (8 bytes)
    version u16 (1), flags u16, num_items u32, frame_rows u32, n_frames u32
    offsets u32[num_items + 1]     item boundaries in the uncompressed concatenation of the items' bytes
    frames[n_frames]: first_item u32, n_items u32, compressed_off u64, compressed_len u32, uncompressed_len u32
    the zstd frames

Frame ``f`` holds items ``[f * frame_rows, ...)``. ``compression_level='sample'`` keeps the classic chunk layout
and compresses each item's bytes as its own zstd frame. Decompression goes through the core's bounded
:func:`~streaming_core.plugin_api.decompress`.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from streaming_core.plugin_api import ShardCorruptError, decompress

__all__ = ['MAGIC', 'FramedChunk', 'is_framed', 'inflate_item']

#: The first bytes of a framed zstd chunk.
MAGIC = b'LDFZ01\0\0'
_PREFIX = struct.Struct('<8sHHIII')
_FRAME = struct.Struct('<IIQII')
#: An item of a classic chunk is addressed by u32 offsets, so it inflates to less than this.
_ITEM_LIMIT = 1 << 32


def is_framed(data: Any) -> bool:
    """Whether a chunk's bytes start with the framed zstd magic."""
    return len(data) >= len(MAGIC) and bytes(data[:len(MAGIC)]) == MAGIC


def inflate_item(data: Any, where: str) -> bytes:
    """One item of a ``compression_level='sample'`` chunk, decompressed.

    Raises:
        ShardCorruptError: not valid zstd data (naming ``where``).
    """
    try:
        return decompress('zstd', bytes(data), _ITEM_LIMIT)
    except ShardCorruptError as err:
        raise ShardCorruptError(f'{where}: the zstd-compressed item does not decompress ({err}).') from None


class FramedChunk:
    """A framed zstd chunk: ``item(i)`` is item ``i``'s bytes (its frame inflated once, the last frame kept).

    Raises:
        ShardCorruptError: naming the file: a header or frame table that is truncated, inconsistent with the index,
            or a frame that does not inflate to its recorded size.
    """

    def __init__(self, data: Any, size: int, count: int, path: str) -> None:
        self._data = data
        self.path = path
        if size < _PREFIX.size:
            raise ShardCorruptError(f'{path}: {size} bytes cannot hold a framed zstd header (truncated).')
        _, version, _, items, rows, frames = _PREFIX.unpack_from(data, 0)
        if version != 1:
            raise ShardCorruptError(f'{path}: framed zstd version {version} is not supported (only 1).')
        if items != count:
            raise ShardCorruptError(f'{path}: the chunk holds {items} items but index.json says {count}.')
        if rows <= 0 or frames != (items + rows - 1) // rows:
            raise ShardCorruptError(f'{path}: a framed header of {items} items in {frames} frames of {rows} is '
                                    f'inconsistent (corrupt).')
        table = _PREFIX.size + 4 * (items + 1)
        end = table + _FRAME.size * frames
        if size < end:
            raise ShardCorruptError(f'{path}: {size} bytes cannot hold the offsets and frame table of {items} items '
                                    f'({end} bytes); the chunk is shorter than its index says (truncated).')
        self._offsets = np.frombuffer(data, dtype='<u4', count=items + 1, offset=_PREFIX.size).astype(np.int64)
        if self._offsets[0] != 0 or np.any(np.diff(self._offsets) < 0):
            raise ShardCorruptError(f'{path}: the item offsets of the framed chunk are inconsistent (corrupt).')
        self._rows = rows
        self._frames: list[tuple[int, int, int, int, int]] = []
        for f in range(frames):
            first, n, start, length, raw = _FRAME.unpack_from(data, table + f * _FRAME.size)
            expected = int(self._offsets[min(first + n, items)] - self._offsets[first]) if first < items else -1
            if first != f * rows or n <= 0 or first + n > items or raw != expected:
                raise ShardCorruptError(f'{path}: frame {f} of the framed chunk is inconsistent (corrupt).')
            if start < end or start + length > size:
                raise ShardCorruptError(f'{path}: frame {f} runs to byte {start + length} of a {size}-byte chunk; '
                                        f'the chunk is shorter than its index says (truncated or corrupt).')
            self._frames.append((first, n, start, length, raw))
        self._cached: tuple[int, bytes] = (-1, b'')

    def _frame(self, f: int) -> bytes:
        if self._cached[0] != f:
            first, _, start, length, raw = self._frames[f]
            try:
                data = decompress('zstd', bytes(self._data[start:start + length]), raw)
            except ShardCorruptError as err:
                raise ShardCorruptError(f'{self.path}: zstd frame {f} does not decompress ({err}).') from None
            if len(data) != raw:
                raise ShardCorruptError(f'{self.path}: zstd frame {f} inflates to {len(data)} bytes, not the '
                                        f'{raw} its table records (corrupt).')
            self._cached = (f, data)
        return self._cached[1]

    def item(self, index: int) -> memoryview:
        """Item ``index``'s bytes (uncompressed)."""
        f = index // self._rows
        base = int(self._offsets[self._frames[f][0]])
        start, end = int(self._offsets[index]) - base, int(self._offsets[index + 1]) - base
        return memoryview(self._frame(f))[start:end]
