"""A commit's tree listings, kept once per node: a commit never changes, so neither does the listing of a directory
at it, and every rank, worker and later job of the node reads the first one's copy instead of listing the
repository again (one or more requests per 1,000 files).

Each listing is a JSON file under ``<cache root>/hf-listings/`` (:func:`~streaming_core.plugin_api.cache_root`),
named by a digest of ``(endpoint, kind, repository, commit, directory, token digest)`` and holding that key, so a
file is used only for exactly that listing, by processes sending the same token (a short digest of it, never the
token; ``anonymous`` without one): a process with another token, or none, lists for itself and so has its access
to the repository checked. It is written to a temporary name and renamed; a file that cannot be read, or does
not hold the key and a well-formed listing, is ignored (listed again and rewritten). Set
``STREAMING_HF_LISTINGS=0`` to keep listings in the process only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ['LISTINGS_ENV', 'load_listing', 'save_listing']

#: Set to ``0`` to keep no listing on disk.
LISTINGS_ENV = 'STREAMING_HF_LISTINGS'

Key = tuple[str, str, str, str, str, str]
Listing = list[tuple[str, Any, Any]]


def _path(key: Key) -> str | None:
    if os.environ.get(LISTINGS_ENV, '1').strip().lower() in ('0', 'false', 'no', 'off'):
        return None
    from streaming_core.plugin_api import cache_root
    digest = hashlib.blake2s('\0'.join(key).encode('utf-8'), digest_size=16).hexdigest()
    return os.path.join(cache_root(), 'hf-listings', f'{digest}.json')


def _well_formed(files: Any) -> bool:
    return isinstance(files, list) and all(
        isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)
        and (row[1] is None or (isinstance(row[1], int) and not isinstance(row[1], bool) and row[1] >= 0))
        and (row[2] is None or isinstance(row[2], str)) for row in files)


def load_listing(key: Key) -> Listing | None:
    """The node's copy of the listing ``key`` (``(endpoint, kind, repo, commit, directory, token digest)``), or
    None."""
    path = _path(key)
    if path is None:
        return None
    try:
        with open(path, 'rb') as handle:
            obj = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(obj, dict) or obj.get('key') != list(key) or not _well_formed(obj.get('files')):
        return None
    return [(name, size, etag) for name, size, etag in obj['files']]


def save_listing(key: Key, files: Sequence[tuple[str, Any, Any]]) -> None:
    """Keep the listing ``key`` for the node (best effort: a cache that cannot be written is skipped)."""
    path = _path(key)
    if path is None:
        return
    rows = [[str(name), size if isinstance(size, int) else None, etag if isinstance(etag, str) else None]
            for name, size, etag in files]
    data = json.dumps({'key': list(key), 'files': rows}, separators=(',', ':')).encode('utf-8')
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, scratch = tempfile.mkstemp(prefix='.listing-', dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, 'wb') as handle:
                handle.write(data)
            os.replace(scratch, path)
        except BaseException:
            try:
                os.remove(scratch)
            except OSError:
                pass
            raise
    except OSError:
        pass
