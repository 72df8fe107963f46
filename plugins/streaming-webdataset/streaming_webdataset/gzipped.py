"""Gzip-compressed WebDataset shards (``.tar.gz``, ``.tgz``): indexed whole-file, read as compressed shards.

A gzip stream cannot be read at an offset, so indexing a compressed tar reads all of it (in ranged reads of
:data:`READ_CHUNK` bytes), decompresses it (bounded, into a temporary file) and walks the plain tar's headers. That
gives its sample count and its decompressed size, so the index entry describes it to the core as a *compressed
shard* (``compression: 'gz'``, ``zip_data`` the ``.tar.gz``, ``raw_data`` the plain tar, see
:func:`streaming_webdataset.builder.entry_for`), exactly as an MDS shard written with ``compression='gz'``: the core
downloads the ``.tar.gz``, decompresses it (bounded by the raw size the index declares) into the plain tar, counts
the plain tar (and the compressed copy while it exists) against ``cache_limit``, drops the compressed copy unless
``keep_zip`` (or the stream has no remote), and evicts the plain tar like any shard.

The plain tar's name (:func:`plain_name`) lies under the hidden directory :data:`PLAIN_DIR` of the local directory
(hidden files are never listed as data, so it is not indexed as a tar of its own) and carries a digest of the
compressed file's listing entry (name, size, etag, modification time), so a replaced ``.tar.gz`` gets another name
and a copy of its earlier bytes is never served; the reader removes such stale copies (:func:`remove_stale_copies`).

Decompression while indexing is bounded: more than :data:`LIMIT_ENV` bytes (default :data:`DEFAULT_LIMIT`) out of
one file is refused as a probable gzip bomb. When reading, the core bounds it by the size the index declares.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from streaming_core.plugin_api import ShardCorruptError

__all__ = ['SUFFIXES', 'LIMIT_ENV', 'DEFAULT_LIMIT', 'READ_CHUNK', 'PLAIN_DIR', 'COMPRESSION', 'is_gzipped',
           'gunzip', 'gunzip_bytes', 'plain_name', 'remove_stale_copies']

#: The file name endings of gzip-compressed tars.
SUFFIXES = ('.tar.gz', '.tgz')
#: The environment variable bounding the decompressed size of one shard while indexing, in bytes.
LIMIT_ENV = 'STREAMING_WEBDATASET_GUNZIP_LIMIT'
#: The default bound: 64 GiB.
DEFAULT_LIMIT = 64 << 30
#: The size of each ranged read of a compressed tar while indexing it.
READ_CHUNK = 16 << 20
#: The hidden directory (relative to the local directory) holding the decompressed copies.
PLAIN_DIR = '.gunzipped'
#: The core's compression name for gzip (the builtin ``gz`` compressor).
COMPRESSION = 'gz'
_CHUNK = 1 << 20
_HEX = frozenset('0123456789abcdef')


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


def plain_name(item: Any) -> str:
    """The relative name of the decompressed copy of the listed compressed tar ``item`` (a
    :class:`~streaming_core.derived_index.SourceFile`): ``.gunzipped/<its name>/<digest of its listing entry>.tar``.
    """
    key = [item.name, int(item.size), getattr(item, 'etag', None) or '', getattr(item, 'mtime', None) or '']
    digest = hashlib.sha256(json.dumps(key, separators=(',', ':')).encode('utf-8', 'surrogateescape')).hexdigest()
    return f'{PLAIN_DIR}/{item.name}/{digest[:16]}.tar'


def remove_stale_copies(path: str) -> int:
    """Remove the decompressed copies of earlier versions of the same compressed tar next to ``path`` (the current
    copy); return how many were removed. Best effort: a file another process removed first is skipped."""
    directory, current = os.path.split(path)
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        stem = name[:-len('.tar')]
        if name != current and name.endswith('.tar') and len(stem) == 16 and all(c in _HEX for c in stem):
            try:
                os.remove(os.path.join(directory, name))  # an open memory map of it stays valid
                removed += 1
            except OSError:
                pass
    return removed
