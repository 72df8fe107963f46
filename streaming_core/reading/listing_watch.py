"""A job never serves a file replaced on the remote under an index derived from the listing of the files.

A stream without ``index.json`` (Parquet, WebDataset) reads an index derived from the listing of its directory
(names, sizes, etags or modification times; :mod:`streaming_core.reading.derived_index`). Its files carry no hashes,
so a file replaced on the remote with the same name and size after the index was derived would be downloaded and
served under the old index: other rows in the same row groups, with no error. After each download of such a file,
:func:`check_listed` lists that one name on the remote (one request, next to the download of a data file; a stat for
a local path) and compares its entry with the one the index was derived from: another entry removes the copy and
stops the job with :class:`~streaming_core.errors.DatasetVersionError`.

A rebuild of the derived index by another process of the node (a newer job) notes a purge when an entry it knew
changed or disappeared, so a job on the old index stops before opening such a file, downloaded or not
(:mod:`streaming_core.reading.version_guard`). An ``hf://`` stream's listing is a commit's and never changes.
"""

from __future__ import annotations

import os
from typing import Any

from streaming_core.common.paths import state_dir
from streaming_core.errors import DatasetVersionError
from streaming_core.reading.cache_record import file_identity
from streaming_core.reading.derived_index import (
    DERIVED_LISTING_NAME,
    read_listing,
    same_entry,
    source_file,
)
from streaming_core.storage.facade import ObjectStat, is_remote, join, list_with_stats, local_path
from streaming_core.storage.redact import redact_url

__all__ = ['check_listed']

#: Per state directory: the listing record's file identity, and its entries by name (read once per version).
_records: dict[str, tuple[Any, dict[str, list[Any]]]] = {}


def _entries(sdir: str) -> dict[str, list[Any]]:
    """The entries of the listing record in ``sdir`` by name (empty without one)."""
    identity = file_identity(os.path.join(sdir, DERIVED_LISTING_NAME))
    cached = _records.get(sdir)
    if cached is not None and cached[0] == identity:
        return cached[1]
    record = read_listing(sdir)
    rows = record['files'] if record is not None else []
    entries = {row[0]: row for row in rows if isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)}
    _records[sdir] = (identity, entries)
    return entries


def _listed_now(stream: Any, name: str) -> list[Any] | None:
    """The remote's listing entry of ``name`` now (None: no such file)."""
    root = stream.remote_dir
    if not is_remote(root):
        try:
            info = os.stat(os.path.join(local_path(root), *name.split('/')))
        except FileNotFoundError:
            return None
        stat = ObjectStat(size=info.st_size, mtime=str(info.st_mtime_ns), inode=info.st_ino,
                          ctime=str(info.st_ctime_ns))
        return source_file(name, stat, root).key()
    url = join(root, name)
    for item in list_with_stats(url, timeout=float(stream.download_timeout or 60.0),
                                retries=int(stream.download_retry or 0), options=stream.storage_options):
        if item.url == url:
            return source_file(name, item.stat, root).key()
    return None


def check_listed(stream: Any, name: str, path: str) -> None:
    """After downloading the file ``name`` of ``stream`` to ``path``: when the stream's index is derived from its
    remote's listing, the remote file must still have the listing entry the index was derived from.

    Raises:
        DatasetVersionError: it was replaced or removed meanwhile (the copy at ``path`` is removed first).
    """
    identity = str(getattr(stream, 'index_identity', None) or '')
    if not identity.startswith('derived:') or not stream.remote_dir:
        return
    entry = _entries(getattr(stream, 'purge_dir', None) or state_dir(stream.local_dir, create=False)).get(name)
    if entry is None:  # not a file of the listing (a foreign index's shards), or no record: nothing to compare
        return
    now = _listed_now(stream, name)
    if now is not None and same_entry(entry, now):
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    what = 'was removed' if now is None else 'was replaced'
    raise DatasetVersionError(
        f'The data of {stream!r} changed while this job read it: {redact_url(join(stream.remote_dir, name))} {what} '
        f'after this job\'s index was derived from the listing of its files (listed as {entry[1:]}, now '
        f'{now[1:] if now is not None else "absent"}). Reading on would serve the new file under the old index. '
        f'Restart the job to read the new version; write new versions of a dataset to new directories.')
