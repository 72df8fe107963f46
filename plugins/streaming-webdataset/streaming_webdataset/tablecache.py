"""The sample table of an opened tar (keys, fields, member offsets), kept across processes.

Opening a tar walks its headers (see :mod:`streaming_webdataset.tarscan`), which costs tens of microseconds per
member. Every DataLoader worker opens the tars it reads, and a block-global shuffle makes every worker read from every
tar, so without sharing each worker (and each epoch's new workers) would walk every tar again. The first walk of a
file writes its table to a small JSON file, keyed by the file's real path, size, modification time and inode (a
replaced file gets another key, so a table is never served for other bytes; a decompressed copy of a ``.tar.gz``,
whose name names the compressed file's version, by its path and size, so decompressing it again adds no table), under
``$STREAMING_WEBDATASET_TABLES`` (default: ``webdataset-tables`` under streaming-core's cache root, which is the
user's own: a table is trusted, so it must not sit where another user can write; an empty value turns the cache off).
A table that cannot be read or disagrees with the index is ignored and the tar is walked. The directory is created
private (mode 0700; a default directory another user made is not used), and once per process the first table
written removes tables neither written nor read for :data:`MAX_TABLE_AGE` (a pruned one costs one walk).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time

from streaming_core.plugin_api import cache_root
from streaming_webdataset.gzipped import PLAIN_DIR
from streaming_webdataset.tarscan import Sample

__all__ = ['TABLES_ENV', 'MAX_TABLE_AGE', 'tables_dir', 'load_table', 'save_table']

logger = logging.getLogger('streaming_webdataset')

#: The environment variable naming the cache directory (empty: no cache).
TABLES_ENV = 'STREAMING_WEBDATASET_TABLES'
#: Tables neither written nor read for this long (seconds) are removed by the first table a process writes.
MAX_TABLE_AGE = 14 * 24 * 3600.0
_VERSION = 1
_pruned = False


def tables_dir() -> str | None:
    """Where tables are kept, or None when the cache is off (or the default directory is another user's)."""
    value = os.environ.get(TABLES_ENV)
    if value is None:
        default = os.path.join(cache_root(), 'webdataset-tables')
        return default if _own_or_absent(default) else None
    return value or None


_checked: dict[str, bool] = {}


def _own_or_absent(directory: str) -> bool:
    """Whether ``directory`` is this user's or does not exist yet (asked once per process): tables are trusted, so
    a directory someone else made (a cache root shared between users) is not used, and a warning says so."""
    if directory not in _checked:
        try:
            owner = os.stat(directory).st_uid
        except OSError:
            owner = os.getuid()
        _checked[directory] = owner == os.getuid()
        if not _checked[directory]:
            logger.warning('%s belongs to another user: the WebDataset sample tables there are not used (set %s to '
                           'a directory of yours).', directory, TABLES_ENV)
    return _checked[directory]


def _prune(directory: str) -> None:
    """Remove the tables (and temporary files) of ``directory`` untouched for :data:`MAX_TABLE_AGE`, once per
    process."""
    global _pruned
    if _pruned:
        return
    _pruned = True
    cutoff = time.time() - MAX_TABLE_AGE
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.endswith(('.json', '.tmp')):
            continue
        path = os.path.join(directory, name)
        try:
            if os.stat(path).st_mtime < cutoff:
                os.remove(path)
        except OSError:
            pass


def _key(path: str) -> str | None:
    directory = tables_dir()
    if directory is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    real = os.path.realpath(path)
    if f'{os.sep}{PLAIN_DIR}{os.sep}' in real:
        # Our decompressed copy of a .tar.gz: its name holds a digest of the compressed file's listing entry, so its
        # bytes are those of one version; each decompression again (after an eviction) is a new inode, not new data.
        text = f'{_VERSION}|{real}|{info.st_size}'
    else:
        text = f'{_VERSION}|{real}|{info.st_size}|{info.st_mtime_ns}|{info.st_ino}|{info.st_ctime_ns}'
    return os.path.join(directory, hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest() + '.json')


def load_table(path: str, samples: int, size: int) -> list[Sample] | None:
    """The cached table of the tar at ``path`` when there is one for these bytes with ``samples`` samples whose
    members lie inside ``size`` bytes, else None."""
    where = _key(path)
    if where is None:
        return None
    try:
        with open(where, 'rb') as handle:
            obj = json.loads(handle.read())
        fields = obj['fields']
        table = []
        for key, row in zip(obj['keys'], obj['rows']):
            members = [(fields[row[i]], row[i + 1], row[i + 2]) for i in range(0, len(row), 3)]
            table.append(Sample(key, members))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:  # (the check below fails it too)
        logger.debug('ignoring the sample table %s of %s: %s', where, path, err)
        return None
    if len(table) != samples or len(obj['rows']) != samples or any(
            offset < 0 or offset + length > size for sample in table for _, offset, length in sample.fields):
        return None
    try:
        os.utime(where)  # in use: the pruning of untouched tables keeps it
    except OSError:
        pass
    return table


def save_table(path: str, table: list[Sample]) -> None:
    """Keep the table of the tar at ``path`` for other processes (best effort: failures are logged, not raised)."""
    where = _key(path)
    if where is None:
        return
    fields: dict[str, int] = {}
    rows = []
    for sample in table:
        row: list[int] = []
        for field, offset, length in sample.fields:
            row += [fields.setdefault(field, len(fields)), offset, length]
        rows.append(row)
    data = json.dumps({'keys': [s.key for s in table], 'fields': list(fields), 'rows': rows},
                      separators=(',', ':')).encode('utf-8', 'surrogateescape')
    try:
        os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
        _prune(os.path.dirname(where))
        handle, temp = tempfile.mkstemp(dir=os.path.dirname(where), suffix='.tmp')
        with os.fdopen(handle, 'wb') as out:
            out.write(data)
        os.replace(temp, where)
    except OSError as err:
        logger.debug('cannot keep the sample table of %s in %s: %s', path, where, err)
