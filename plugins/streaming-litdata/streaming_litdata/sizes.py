"""The sizes of litdata's whole-file zstd chunks (``compression_level='chunk'``, ``chunk-R-N.zstd.bin``), which its
``index.json`` does not record: it gives each chunk's decompressed size (``chunk_bytes``) only.

streaming-core downloads a compressed shard file by its exact size, so the index builder needs each ``.zstd.bin``
file's size. It takes it from a directory listing when it has one (``files`` with sizes); otherwise it finds it with
ranged reads (:func:`probe_size`): zstd never makes more than :func:`zstd_bound` bytes of ``chunk_bytes`` bytes, and
a range past the end of a file gives the bytes that exist, so a bisection with one-byte reads narrows the size to a
window, and one read of that window gives it exactly. That is one read for a chunk under :data:`WINDOW` and about
``log2(bound / WINDOW) + 1`` small reads for a larger one, run for several chunks at once (:func:`probe_sizes`).
Storage whose backend has no ranged reads downloads the whole file for every read, so there (any scheme outside
:data:`RANGED_SCHEMES`) each chunk is read whole once instead (:func:`window_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from streaming_core.plugin_api import IndexFormatError

__all__ = ['WINDOW', 'PROBE_THREADS', 'RANGED_SCHEMES', 'zstd_bound', 'window_for', 'probe_size', 'probe_sizes',
           'local_reader']

#: Reads: ``read(name, start, length) -> bytes`` (fewer bytes at the end of the file, none past it).
Read = Callable[[str, int, int], bytes]

#: The last bisection window, read whole (1 MiB): a chunk smaller than this costs one read.
WINDOW = 1 << 20
#: How many chunks are probed at once.
PROBE_THREADS = 8
_BLOCK = 128 << 10
#: URL schemes whose streaming-core backends serve a ranged read as one small request (local paths too).
RANGED_SCHEMES = frozenset({'file', 'http', 'https', 's3', 'hf', 'sftp', 'dbfs'})
_WHOLE = 1 << 62


def window_for(where: str) -> int:
    """The bisection window for the directory ``where``: :data:`WINDOW` for a local path or a scheme of
    :data:`RANGED_SCHEMES`, else one larger than any file (each file is read whole, once)."""
    scheme, sep, _ = where.partition('://')
    return WINDOW if not sep or scheme.lower() in RANGED_SCHEMES else _WHOLE


def zstd_bound(size: int) -> int:
    """The most bytes one zstd frame of ``size`` input bytes can take (``ZSTD_COMPRESSBOUND``)."""
    return size + (size >> 8) + (((_BLOCK - size) >> 11) if size < _BLOCK else 0)


def probe_size(read: Read, name: str, bound: int, where: str, window: int = WINDOW) -> int:
    """The size of the file ``name``, known to be at most ``bound`` bytes, found with ranged reads.

    Raises:
        FileNotFoundError: the file does not exist (what ``read`` raises).
        IndexFormatError: the file is larger than ``bound`` (naming it): not what ``index.json`` describes.
    """
    low, high = 0, bound  # the size lies in [low, high]
    while high - low >= window:
        middle = (low + high) // 2
        if read(name, middle, 1):  # byte ``middle`` exists: the size is at least middle + 1
            low = middle + 1
        else:
            high = middle
    tail = read(name, low, high - low + 1)
    if len(tail) > high - low:
        raise IndexFormatError(f'{where}: {name} has more than {bound} bytes, more than zstd makes of the '
                               f'decompressed size index.json records for it; the file does not belong to this '
                               f'index.json (rewritten or corrupt).')
    return low + len(tail)


def probe_sizes(read: Read, wanted: Sequence[tuple[str, int]], where: str,
                window: int = WINDOW) -> list[int | None]:
    """The sizes of the files ``(name, bound)`` in ``wanted`` (None for a missing file), several probed at once."""
    def one(item: tuple[str, int]) -> int | None:
        try:
            return probe_size(read, item[0], item[1], where, window)
        except FileNotFoundError:
            return None
    if len(wanted) <= 1:
        return [one(item) for item in wanted]
    with ThreadPoolExecutor(max_workers=min(PROBE_THREADS, len(wanted)),
                            thread_name_prefix='litdata-sizes') as pool:
        return list(pool.map(one, wanted))


def local_reader(root: str) -> Read:
    """``read(name, start, length)`` over the files of the local directory ``root``."""
    import os

    def read(name: str, start: int, length: int) -> bytes:
        with open(os.path.join(root, *name.split('/')), 'rb') as handle:
            handle.seek(start)
            return handle.read(length)
    return read
