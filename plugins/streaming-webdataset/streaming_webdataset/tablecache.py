"""The sample table of an opened tar (keys, fields, member offsets), kept across processes.

Opening a tar walks its headers (see :mod:`streaming_webdataset.tarscan`), which costs tens of microseconds per
member. Every DataLoader worker opens the tars it reads, and a block-global shuffle makes every worker read from every
tar, so without sharing each worker (and each epoch's new workers) would walk every tar again. The first walk of a
file writes its table to a small JSON file, keyed by the file's real path, size, modification time and inode (a
replaced file gets another key, so a table is never served for other bytes), under
``$STREAMING_WEBDATASET_TABLES`` (default: ``streaming-webdataset-tables`` in the system temporary directory; an
empty value turns the cache off). A table that cannot be read or disagrees with the index is ignored and the tar is
walked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile

from streaming_webdataset.tarscan import Sample

__all__ = ['TABLES_ENV', 'tables_dir', 'load_table', 'save_table']

logger = logging.getLogger('streaming_webdataset')

#: The environment variable naming the cache directory (empty: no cache).
TABLES_ENV = 'STREAMING_WEBDATASET_TABLES'
_VERSION = 1


def tables_dir() -> str | None:
    """Where tables are kept, or None when the cache is off."""
    value = os.environ.get(TABLES_ENV)
    if value is None:
        return os.path.join(tempfile.gettempdir(), 'streaming-webdataset-tables')
    return value or None


def _key(path: str) -> str | None:
    directory = tables_dir()
    if directory is None:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None
    text = f'{_VERSION}|{os.path.realpath(path)}|{info.st_size}|{info.st_mtime_ns}|{info.st_ino}|{info.st_ctime_ns}'
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
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
        logger.debug('ignoring the sample table %s of %s: %s', where, path, err)
        return None
    if len(table) != samples or len(obj['rows']) != samples or any(
            offset < 0 or offset + length > size for sample in table for _, offset, length in sample.fields):
        return None
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
        os.makedirs(os.path.dirname(where), exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=os.path.dirname(where), suffix='.tmp')
        with os.fdopen(handle, 'wb') as out:
            out.write(data)
        os.replace(temp, where)
    except OSError as err:
        logger.debug('cannot keep the sample table of %s in %s: %s', path, where, err)
