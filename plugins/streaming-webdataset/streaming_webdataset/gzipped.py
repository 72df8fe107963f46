"""Gzip-compressed WebDataset shards (``.tar.gz``, ``.tgz``): read whole-file, decompressed once.

A gzip stream cannot be read at an offset, so a compressed tar is downloaded whole (like any shard), decompressed
once into a plain tar and then read like one (its headers walked, members sliced from a memory map). The plain copy
is kept next to the sample tables (:func:`streaming_webdataset.tablecache.tables_dir`), keyed like them by the
compressed file's real path, size, modification time and inode, so every process of a node shares one copy and a
replaced file gets a new one (the copy of its earlier bytes is removed then). With the table cache turned off, each
opening decompresses into memory.

Decompression is bounded: more than :data:`LIMIT_ENV` bytes (default :data:`DEFAULT_LIMIT`) out of one file is
refused as a probable gzip bomb. The plain copy is not counted by ``cache_limit``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from collections.abc import Callable, Iterable
from typing import BinaryIO

from streaming_core.plugin_api import ShardCorruptError
from streaming_webdataset.tablecache import tables_dir

__all__ = ['SUFFIXES', 'LIMIT_ENV', 'DEFAULT_LIMIT', 'is_gzipped', 'gunzip', 'gunzip_bytes', 'plain_copy']

#: The file name endings of gzip-compressed tars.
SUFFIXES = ('.tar.gz', '.tgz')
#: The environment variable bounding the decompressed size of one shard, in bytes.
LIMIT_ENV = 'STREAMING_WEBDATASET_GUNZIP_LIMIT'
#: The default bound: 64 GiB.
DEFAULT_LIMIT = 64 << 30
_CHUNK = 1 << 20


def is_gzipped(name: str) -> bool:
    """Whether ``name`` is a gzip-compressed tar (by its ending)."""
    return name.lower().endswith(SUFFIXES)


def _limit() -> int:
    text = os.environ.get(LIMIT_ENV, '')
    try:
        return int(text) if text else DEFAULT_LIMIT
    except ValueError:
        raise ValueError(f'{LIMIT_ENV}={text!r} is not a number of bytes.') from None


def gunzip(chunks: Iterable[bytes], write: Callable[[bytes], object], shown: str) -> int:
    """Decompress the gzip data in ``chunks`` (one or more concatenated gzip members) through ``write``; return
    the decompressed size.

    Raises:
        ShardCorruptError: naming ``shown``: not gzip data, corrupt, truncated, or more than the bound.
    """
    limit = _limit()
    inflater = zlib.decompressobj(wbits=31)
    total = 0
    started = pending = False
    for chunk in chunks:
        data = chunk
        while data:
            started = pending = True
            try:
                out = inflater.decompress(data, _CHUNK)
                while out:
                    total += len(out)
                    if total > limit:
                        raise ShardCorruptError(f'{shown} decompresses to more than {limit} bytes (set {LIMIT_ENV} '
                                                f'to allow more, or store the tar uncompressed).')
                    write(out)
                    out = inflater.decompress(inflater.unconsumed_tail, _CHUNK) if inflater.unconsumed_tail else b''
            except zlib.error as err:
                raise ShardCorruptError(f'{shown} is not valid gzip data ({err}); write it again or remove it.'
                                        ) from None
            if inflater.eof:
                pending = False
                data = inflater.unused_data
                inflater = zlib.decompressobj(wbits=31)  # a following gzip member
                if data.strip(b'\0') == b'':  # trailing padding
                    data = b''
            else:
                data = b''
    if not started:
        raise ShardCorruptError(f'{shown} is empty; a .tar.gz shard holds at least one gzip member.')
    if pending:
        raise ShardCorruptError(f'{shown} is truncated: the gzip stream ends early after {total} decompressed '
                                f'bytes; write it again or remove it.')
    return total


def gunzip_bytes(data: bytes, shown: str) -> bytes:
    """The decompressed bytes of a whole gzip file (bounded, see :func:`gunzip`)."""
    parts: list[bytes] = []
    gunzip((data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)), parts.append, shown)
    return b''.join(parts)


def _read_chunks(handle: BinaryIO) -> Iterable[bytes]:
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            return
        yield chunk


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()


def plain_copy(path: str) -> str | bytes:
    """The decompressed tar of the local ``path``: the path of a shared plain copy (made now if missing), or its
    bytes when the table cache is off.

    Raises:
        ShardCorruptError: naming ``path`` (see :func:`gunzip`).
    """
    directory = tables_dir()
    if directory is None:
        with open(path, 'rb') as handle:
            return gunzip_bytes(handle.read(), path)
    info = os.stat(path)
    owner = _digest(f'gz|{os.path.realpath(path)}')[:32]
    target = os.path.join(directory, f'{owner}-{_digest(f"{info.st_size}|{info.st_mtime_ns}|{info.st_ino}")[:32]}.tar')
    if os.path.isfile(target):
        return target
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):  # copies of earlier bytes at this path (the file was fetched again)
        if name.startswith(f'{owner}-') and name.endswith('.tar') and name != os.path.basename(target):
            try:
                os.remove(os.path.join(directory, name))  # an open memory map of it stays valid
            except OSError:
                pass
    handle, temp = tempfile.mkstemp(dir=directory, suffix='.tmp')
    try:
        with os.fdopen(handle, 'wb') as out, open(path, 'rb') as source:
            gunzip(_read_chunks(source), out.write, path)
        os.replace(temp, target)  # atomic: concurrent openers write the same bytes
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
    return target
