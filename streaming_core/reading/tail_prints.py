"""Prints of the ends of a local directory's files, taken when an index is derived from its listing, for the
rewrites its stat cannot show.

A derived index (Parquet, WebDataset) of a local directory names each file by its size and modification time
(:mod:`streaming_core.reading.listing_watch`). A file overwritten in place with bytes of the same size keeps both
when its modification time is put back (``cp -p``, ``rsync -t --inplace``, ``touch -r``), or when the write falls
within the coarse clock's tick of the previous one; only its change time moves (in the second case, not even that).
The change time alone cannot decide, since a ``chmod`` or a hard link moves it without touching the data. So when a
derived index of a local directory is built, the last :data:`TAIL_BYTES` of each file are hashed (a Parquet file's
footer is there) and kept beside the listing version (:func:`write_prints`). A file whose change time moved since
the listing, or whose listing fell within :data:`RACY_NS` of its last change, has its tail hashed again before it is
opened or copied (:func:`unchanged_tail`), and another print stops the job. A rewrite that keeps the size, the
modification time and the last :data:`TAIL_BYTES` bytes is not seen.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ['TAIL_BYTES', 'RACY_NS', 'tail_print', 'take_prints', 'write_prints', 'read_prints', 'unchanged_tail']

#: Bytes at the end of each file that are hashed.
TAIL_BYTES = 4096
#: A file changed this close (ns) to the moment it was listed may be changed again without its stat moving.
RACY_NS = 2_000_000_000


def tail_print(path: str) -> str | None:
    """The hash of the last :data:`TAIL_BYTES` of the file at ``path`` and its size (None when it does not exist)."""
    try:
        with open(path, 'rb') as handle:
            size = os.fstat(handle.fileno()).st_size
            tail = os.pread(handle.fileno(), min(size, TAIL_BYTES), max(size - TAIL_BYTES, 0))
    except FileNotFoundError:
        return None
    return hashlib.blake2b(tail, digest_size=16, person=str(size).encode()[:16]).hexdigest()


def _ctime(entry: list[Any]) -> int | None:
    """The change time (ns) a local listing entry (``[name, size, etag, 'mtime_ns/ctime_ns']``) records."""
    parts = str(entry[3] or '').split('/', 1)
    try:
        return int(parts[1]) if len(parts) == 2 else None
    except ValueError:
        return None


def take_prints(root: str, entries: Iterable[list[Any]],
                entry_now: Callable[[str, str, str], list[Any] | None]) -> dict[str, Any]:
    """The prints of the files of the local directory ``root`` that ``entries`` list, taken now. A file that changed
    between its listing and its print (``entry_now(name, path, root)``, its entry as it is now, no longer the listed
    one) gets None: it cannot be vouched for."""
    prints: dict[str, str | None] = {}
    for entry in entries:
        name = entry[0]
        path = os.path.join(root, *name.split('/'))
        found = tail_print(path)
        prints[name] = found if found is not None and entry_now(name, path, root) == entry else None
    return {'taken_ns': time.time_ns(), 'prints': prints}


def prints_path(sdir: str, identity: str) -> str:
    """Where the prints of the listing version ``identity`` are kept (beside its entries)."""
    return os.path.join(sdir, f'derived-tails-{hashlib.blake2s(identity.encode(), digest_size=10).hexdigest()}.json')


def write_prints(sdir: str, identity: str, prints: dict[str, Any]) -> None:
    """Keep the prints of the listing version ``identity`` (written atomically)."""
    from streaming_core.storage.facade import write_file_atomic
    write_file_atomic(prints_path(sdir, identity), json.dumps(prints).encode('utf-8'))


def read_prints(sdir: str, identity: str) -> dict[str, Any] | None:
    """The prints of the listing version ``identity`` (None when none were kept: an index built by an older version,
    or of a remote directory)."""
    try:
        with open(prints_path(sdir, identity), 'rb') as handle:
            found = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    ok = isinstance(found, dict) and isinstance(found.get('prints'), dict) and isinstance(found.get('taken_ns'), int)
    return found if ok else None


def unchanged_tail(prints: dict[str, Any] | None, entry: list[Any], now: list[Any], path: str) -> bool:
    """Whether the local file at ``path``, whose entry ``now`` has the size and modification time of its listed
    ``entry``, still holds the listed bytes as far as can be told: its change time has not moved since the listing
    (and the listing was not within :data:`RACY_NS` of that change), or its tail's print is the listed one. Without
    prints (an index built before they were taken) the size and modification time decide, as before."""
    if prints is None:
        return True
    listed_ctime, ctime = _ctime(entry), _ctime(now)
    if listed_ctime is not None and ctime == listed_ctime and prints['taken_ns'] - listed_ctime >= RACY_NS:
        return True
    expected = prints['prints'].get(entry[0], '')
    if expected == '':  # not a file of this listing's prints
        return True
    return expected is not None and tail_print(path) == expected
