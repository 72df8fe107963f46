"""Prints of the bytes that identify a local directory's files, taken when an index is derived from its listing, for
the rewrites their stat cannot show.

A derived index (Parquet, WebDataset) of a local directory names each file by its size and modification time
(:mod:`streaming_core.reading.listing_watch`). A file overwritten in place with bytes of the same size keeps both
when its modification time is put back (``cp -p``, ``rsync -t --inplace``, ``touch -r``), or when the write falls
within the coarse clock's tick of the previous one; only its change time moves (in the second case, not even that).
The change time alone cannot decide, since a ``chmod`` or a hard link moves it without touching the data.

So when a derived index of a local directory is built, each file's *print* is taken before the builder reads the
files (a rewrite between the two then stops the job instead of passing) and kept with the listing version's entries
(:func:`write_prints`, pruned with them): a hash of the byte ranges its index builder names with ``print_span`` (a
Parquet file's whole footer, where its row groups' sizes and statistics are, and the 4 KiB before it), else of
:data:`SAMPLES` blocks of 4 KiB spread over the file, its first and last included (WebDataset's tars end in zero
padding). Before a file read in place is opened (and just after), when its change time moved since the listing or the
listing fell within :data:`RACY_NS` of that change, its print is taken again and compared (:func:`print_verdict`); a
copy of a local remote's file is compared with the print before it is put in place. A rewrite that keeps the size,
the modification time and the printed bytes is not seen, nor a rewrite of a file already open.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ['RACY_NS', 'take_prints', 'write_prints', 'read_prints', 'print_verdict', 'prints_path', 'spread_ranges']

#: A file changed this close (ns) to the moment it was listed may be changed again without its stat moving.
RACY_NS = 2_000_000_000
#: The most bytes of one file that are hashed (a span beyond it is cut to its last bytes).
MAX_SPAN = 64 << 20
#: Blocks of :data:`BLOCK` bytes spread over a file whose builder names no span.
SAMPLES = 16
BLOCK = 4096

Ranges = list[list[int]]
Span = Callable[[str, int], Any]


def spread_ranges(size: int) -> Ranges:
    """:data:`SAMPLES` blocks spread evenly over a file of ``size`` bytes, the first and the last included (the whole
    file when it is smaller)."""
    if size <= SAMPLES * BLOCK:
        return [[0, size]]
    step = (size - BLOCK) / (SAMPLES - 1)
    return [[int(i * step), BLOCK] for i in range(SAMPLES)]


def _ranges(span: Span | None, path: str, size: int) -> Ranges:
    """The ranges to hash: the builder's ``span(path, size)`` (one ``(start, length)`` or a list of them, each cut to
    :data:`MAX_SPAN`), else, or when one falls outside the file or is empty, :func:`spread_ranges`."""
    found = span(path, size) if span is not None else None
    if found is None or len(found) == 0:
        return spread_ranges(size)
    try:
        pairs = [[int(found[0]), int(found[1])]] if not hasattr(found[0], '__len__') else \
            [[int(start), int(length)] for start, length in found]
    except (TypeError, ValueError):
        return spread_ranges(size)
    if any(start < 0 or length <= 0 or start + length > size for start, length in pairs):
        return spread_ranges(size)
    return [[start + max(length - MAX_SPAN, 0), min(length, MAX_SPAN)] for start, length in pairs]


def _print(path: str, ranges: Ranges) -> str | None:
    """The hash of the byte ``ranges`` of the file at ``path`` (None when it does not exist)."""
    digest = hashlib.blake2b(digest_size=16)
    try:
        with open(path, 'rb') as handle:
            for start, length in ranges:
                digest.update(os.pread(handle.fileno(), length, start))
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def _ctime(entry: list[Any]) -> str:
    """The change time a local listing entry (``[name, size, etag, 'mtime_ns/ctime_ns']``) records ('' if none)."""
    parts = str(entry[3] or '').split('/', 1)
    return parts[1] if len(parts) == 2 else ''


def take_prints(root: str, entries: Iterable[list[Any]], span: Span | None,
                entry_now: Callable[[str, str, str], list[Any] | None],
                same_data: Callable[[list[Any], list[Any]], bool]) -> dict[str, Any]:
    """The prints of the files of the local directory ``root`` that ``entries`` list, taken now, over the ranges of
    :func:`_ranges` (``span``: the index builder's ``print_span``). A file whose data changed since its listing
    (``entry_now(name, path, root)``, compared by ``same_data``) gets None: it cannot be vouched for."""
    prints: dict[str, Any] = {}
    for entry in entries:
        name, size = entry[0], int(entry[1])
        path = os.path.join(root, *name.split('/'))
        ranges = _ranges(span, path, size)
        found = _print(path, ranges)
        now = entry_now(name, path, root)
        prints[name] = [found, ranges] if found is not None and now and same_data(entry, now) else None
    return {'taken_ns': time.time_ns(), 'prints': prints}


#: The layout of a prints file (an index kept with prints of another layout has them taken again).
PRINTS_VERSION = 2


def prints_path(sdir: str, identity: str, listing: str | None = None) -> str | None:
    """Where the prints of the derived index ``identity`` are kept, beside its entries
    (:func:`~streaming_core.reading.listing_entries.version_file`)."""
    from streaming_core.reading.listing_entries import version_file
    return version_file(sdir, 'tails', identity, listing)


def write_prints(sdir: str, identity: str, prints: dict[str, Any], entries: list[list[Any]]) -> None:
    """Keep the prints of the derived index ``identity`` of the listing ``entries`` (written atomically)."""
    from streaming_core.reading.listing_entries import listing_key
    from streaming_core.storage.facade import write_file_atomic
    write_file_atomic(str(prints_path(sdir, identity, listing_key(entries))),
                      json.dumps({**prints, 'version': PRINTS_VERSION}).encode('utf-8'))


def _valid(found: Any) -> bool:
    if not (isinstance(found, dict) and found.get('version') == PRINTS_VERSION and isinstance(found.get('prints'), dict)
            and isinstance(found.get('taken_ns'), int)):
        return False
    for value in found['prints'].values():
        if value is None:
            continue
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], list)
                and all(isinstance(pair, list) and len(pair) == 2 and all(isinstance(n, int) for n in pair)
                        for pair in value[1])):
            return False
    return True


def read_prints(sdir: str, identity: str) -> dict[str, Any] | None:
    """The prints of the derived index ``identity`` (None when none were kept, or in another layout: an index built
    by an older version, or of a remote directory). An error other than a missing file is raised."""
    path = prints_path(sdir, identity)
    if path is None:
        return None
    try:
        with open(path, 'rb') as handle:
            found = json.loads(handle.read())
    except (FileNotFoundError, ValueError):
        return None
    return found if _valid(found) else None


def print_verdict(prints: dict[str, Any], entry: list[Any], now: list[Any], served: str,
                  copy: bool = False) -> str | None:
    """None when the bytes at ``served`` are still those the listed ``entry`` described as far as can be told, else
    why not. ``now`` is the file's entry as it is now, with the listed size and modification time; ``served`` is the
    file read in place, or (``copy``) the copy of a local remote's file about to be put in place, whose print is
    always compared."""
    listed, changed = _ctime(entry), _ctime(now)
    moved = changed != listed
    try:
        racy = prints['taken_ns'] - int(listed) < RACY_NS
    except ValueError:
        racy = True
    if not copy and not moved and not racy:
        return None
    found = prints['prints'].get(entry[0])
    if found is None:
        return 'changed while its index was derived (its bytes could not be vouched for then)'
    expected, ranges = found
    if _print(served, ranges) == expected:
        return None
    why = (f'its change time moved from {listed} to {changed}' if moved else
           f'listed within {RACY_NS // 10**9} s of its last change, when its stat cannot show a rewrite')
    return f'rewritten in place with the same size and modification time but other bytes ({why})'
