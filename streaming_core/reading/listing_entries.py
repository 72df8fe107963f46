"""How two listing entries of one file compare, and which local copies a new listing of a directory no longer
vouches for.

A listing entry is ``[name, size, etag, mtime]`` (:meth:`streaming_core.reading.derived_index.SourceFile.key`; a
local file's ``mtime`` is ``'<mtime_ns>/<ctime_ns>'``). :func:`same_entry` tells one version of a file from another
exactly; :func:`same_data_entry` leaves out a local file's change time, which a ``chmod``, a ``chown`` or a hard link
moves without touching the data. :func:`stale_copies` and :func:`changed_data` are what a rebuild of a derived index
removes and whether it stops older jobs (:func:`streaming_core.reading.derived_index.derive_index`). The entries
of each listing version are kept by its identity (:func:`write_version_entries`), so that a job compares the files
it reads with its own version's entries even after a rebuild (:mod:`streaming_core.reading.listing_watch`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from streaming_core.reading.index_file import present_copy
from streaming_core.storage.facade import is_remote, join, local_path

__all__ = ['same_entry', 'same_data_entry', 'changed_data', 'stale_copies', 'same_bytes', 'write_version_entries',
           'read_version_entries', 'entries_by_name', 'KEPT_VERSIONS', 'listing_key', 'version_file']


def same_entry(before: list[Any] | None, now: list[Any]) -> bool:
    """Whether two listing entries (:meth:`SourceFile.key`) name one version of a file: equal, or equal but for the
    change time that a local file's entry recorded before version 0.2 lacks (its mtime alone, no ``/``)."""
    if before is None or before == now:
        return before == now
    if len(before) != 4 or not isinstance(before[3], str) or '/' in before[3] or not isinstance(now[3], str):
        return False
    return before[:3] == now[:3] and now[3].split('/', 1)[0] == before[3] and '/' in now[3]


def same_data_entry(before: list[Any], now: list[Any]) -> bool:
    """Whether two listing entries name one version of a file's data: the same size, etag and modification time;
    a local file's change time, which a ``chmod``, a ``chown`` or a hard link moves, left out."""
    def data(row: list[Any]) -> list[Any]:
        return [row[1], row[2] or '', str(row[3] or '').split('/', 1)[0]] if len(row) == 4 else list(row)
    return data(before) == data(now)


def changed_data(old: dict[str, Any] | None, files: Sequence[Any]) -> bool:
    """Whether the data of a file the previous listing named changed, or it disappeared (files only added, or whose
    metadata alone changed, change nothing a job reads)."""
    if old is None:
        return False
    new = {item.name: item.key() for item in files}
    return any(isinstance(row, list) and row and (row[0] not in new or not same_data_entry(row, new[row[0]]))
               for row in old['files'])


def stale_copies(old: dict[str, Any] | None, files: Sequence[Any], local_dir: str,
                  source: str | None = None) -> list[str]:
    """The local copies the new listing does not vouch for: a file whose listing entry changed or disappeared (every
    present copy of a listed name when the previous listing is unknown). A file of a local ``source`` whose entry
    changed in its change time alone (a ``chmod``, a hard link; or a rewrite in place that restored the size and
    modification time) is compared byte for byte with its copy: kept when equal."""
    try:
        with os.scandir(local_dir) as entries:
            if next(entries, None) is None:  # an empty directory (a first copy): no name to look for
                return []
    except OSError:
        return []
    new = {item.name: item.key() for item in files}
    previous = {}
    if old is not None:
        previous = {row[0]: row for row in old['files'] if isinstance(row, list) and row and isinstance(row[0], str)}
    real_root = os.path.realpath(local_dir)
    stale = []
    for name in sorted(set(new) | set(previous)):
        before = previous.get(name)
        if old is not None and name in new and same_entry(before, new[name]):
            continue
        path = present_copy(local_dir, name, 'listing', real_root)
        if path is None:
            continue
        if source is not None and not is_remote(source) and before is not None and name in new \
                and same_data_entry(before, new[name]) and same_bytes(path, local_path(join(source, name))):
            continue
        stale.append(path)
    return stale


def same_bytes(one: str, other: str) -> bool:
    """Whether two local files hold the same bytes (False when one cannot be read). Not ``filecmp.cmp``: it keeps
    its answers by size and modification time, which a rewrite in place that restores them does not change."""
    try:
        if os.path.getsize(one) != os.path.getsize(other):
            return False
        with open(one, 'rb') as first, open(other, 'rb') as second:
            while True:
                a, b = first.read(1 << 20), second.read(1 << 20)
                if a != b:
                    return False
                if not a:
                    return True
    except OSError:
        return False


#: How many listings :func:`write_version_entries` keeps the entries (and prints) of per state directory; every
#: derived index of a kept listing (one per set of format options: ``columns=``...) keeps its own.
KEPT_VERSIONS = 4


def listing_key(entries: list[list[Any]]) -> str:
    """A short digest of a listing's entries: the derived indexes of one listing with other format options share
    it, and are kept or pruned together."""
    import hashlib
    import json
    return hashlib.blake2s(json.dumps(entries, separators=(',', ':')).encode(), digest_size=8).hexdigest()


def version_file(sdir: str, kind: str, identity: str, listing: str | None = None) -> str | None:
    """The file of ``kind`` (``'files'``: a version's entries; ``'tails'``: its prints) of the derived index
    ``identity``: where to write it for the listing key ``listing``, or, without one, the file there is (None)."""
    import hashlib
    prefix = f'derived-{kind}-{hashlib.blake2s(identity.encode(), digest_size=10).hexdigest()}-'
    if listing is not None:
        return os.path.join(sdir, f'{prefix}{listing}.json')
    try:
        names = [entry.name for entry in os.scandir(sdir) if entry.name.startswith(prefix)]
    except FileNotFoundError:
        return None
    return os.path.join(sdir, names[0]) if names else None


def version_entries_path(sdir: str, identity: str) -> str | None:
    """Where the entries of the listing a derived index of ``identity`` was built from are kept (None: nowhere)."""
    return version_file(sdir, 'files', identity)


def write_version_entries(sdir: str, identity: str, entries: list[list[Any]]) -> None:
    """Keep the listing entries of the version ``identity`` (read by jobs on that version after a rebuild replaced
    the latest listing), and those (and the prints) of the last :data:`KEPT_VERSIONS` listings only."""
    import json

    from streaming_core.storage.facade import write_file_atomic
    write_file_atomic(str(version_file(sdir, 'files', identity, listing_key(entries))),
                      json.dumps(entries).encode('utf-8'))
    found = [entry for entry in os.scandir(sdir) if entry.name.startswith(('derived-files-', 'derived-tails-'))]
    newest: dict[str, int] = {}
    for entry in found:  # derived-<kind>-<identity>-<listing>.json (before 0.2: no listing key)
        key = _listing_of(entry.name)
        newest[key] = max(newest.get(key, 0), entry.stat().st_mtime_ns)
    kept = set(sorted(newest, key=newest.__getitem__)[-KEPT_VERSIONS:])
    for entry in found:
        if _listing_of(entry.name) not in kept:
            try:
                os.remove(entry.path)
            except FileNotFoundError:
                pass


def _listing_of(name: str) -> str:
    parts = name.removesuffix('.json').split('-')
    return parts[3] if len(parts) == 4 else ''


def read_version_entries(sdir: str, identity: str) -> dict[str, list[Any]] | None:
    """The entries by name of the listing version ``identity`` (None when they were not kept)."""
    import json
    path = version_entries_path(sdir, identity)
    if path is None:
        return None
    try:
        with open(path, 'rb') as handle:
            rows = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    return entries_by_name(rows) if isinstance(rows, list) else None


def entries_by_name(rows: list[Any]) -> dict[str, list[Any]]:
    """Listing entries (``[name, size, etag, mtime]`` rows, malformed ones left out) by name."""
    return {row[0]: row for row in rows if isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)}
