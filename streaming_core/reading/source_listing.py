"""The files of a stream's directory as listed (:class:`SourceFile`), for indexes derived from the data
(:mod:`streaming_core.reading.derived_index`): the listing rules (hidden files, writers' artifacts, temporary files and
links left out or refused), the wait for files just written on a store that dates them without an etag, and the
errors of a directory that cannot be indexed or listed.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from streaming_core.errors import IndexFormatError, IndexNotFoundError, PermanentStorageError, StreamingError
from streaming_core.reading.cache_record import COARSE_MARGIN, coarse_mtime
from streaming_core.storage.facade import ObjectStat, is_remote, list_with_stats, local_path
from streaming_core.storage.redact import redact_url

__all__ = ['SourceFile', 'DerivedIndexError', 'NoDatasetError', 'ListingUnavailableError', 'NoLocalDatasetError',
           'ForeignIndexError', 'list_source', 'settled_listing', 'SETTLE_WAIT', 'source_file', 'local_entry']

logger = logging.getLogger('streaming_core.reading.derived_index')  # the name users filter the listing's warnings by


class DerivedIndexError(StreamingError, ValueError):
    """A directory without ``index.json`` cannot be indexed from its files (empty, no indexable files, several
    formats, or a builder refused the files)."""


class NoDatasetError(DerivedIndexError, FileNotFoundError):
    """Nothing at all where a dataset should be: no ``index.json`` and no files (a ``FileNotFoundError`` too, as a
    missing ``index.json`` always was)."""


class ListingUnavailableError(PermanentStorageError):
    """The directory of a stream without ``index.json`` cannot be listed (a web server has no listing; no permission
    to list): the dataset's index is then just missing. Its ``__cause__`` is the listing's error."""


class NoLocalDatasetError(NoDatasetError, IndexNotFoundError):
    """Nothing in the local directory of a stream without a remote: also a ``RuntimeError``, as the reference raises
    for a missing local ``index.json`` with no remote."""


class ForeignIndexError(IndexFormatError):
    """A directory's ``index.json`` is not a streaming index (no ``shards``) and no installed index builder claims
    it; the message names the file and, for a known format, the distribution that reads it."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a stream's directory, as listed.

    Attributes:
        name: Its path relative to the directory, ``/``-separated (``data/train-00000.parquet``).
        size: Its size in bytes.
        etag: The store's entity tag, when the listing reports one.
        mtime: Its modification time as the store reports it, when known (for local files, nanoseconds then the
            change time: ``'<mtime_ns>/<ctime_ns>'``).
    """

    name: str
    size: int
    etag: str | None = None
    mtime: str | None = None

    def key(self) -> list[Any]:
        """What identifies this version of the file in a listing."""
        return [self.name, self.size, self.etag or '', self.mtime or '']


#: Path components that writers leave beside their data and that are never data: Spark and Hadoop's job files and
#: failed or speculative attempts, Parquet summary files, Delta Lake's log, a streaming sink's metadata.
_WRITER_ARTIFACTS = re.compile(r'_temporary|_SUCCESS|_committed_.*|_started_.*|_metadata|_common_metadata|'
                               r'_delta_log|_spark_metadata|_logs')


def _hidden(name: str) -> bool:
    """Left out of a listing: a path component that is hidden (``.``), starts with ``__`` (as Hugging Face
    ``datasets`` skips them) or is a writer's artifact (:data:`_WRITER_ARTIFACTS`), and temporary files (``*.tmp``).
    """
    return (any(part.startswith(('.', '__')) or _WRITER_ARTIFACTS.fullmatch(part) for part in name.split('/'))
            or name.endswith('.tmp'))


def list_source(root: str, *, timeout: float = 60.0, retries: int = 2,
                options: dict[str, Any] | None = None) -> list[SourceFile]:
    """The files under the directory ``root`` (a local path or URL), sorted by name, with sizes and etags / mtimes.

    Hidden files (a path component starting with ``.`` or ``__``), writers' artifacts (Spark's ``_temporary/`` and
    ``_SUCCESS``, ``_delta_log/``...) and temporary files (``*.tmp``) are left out. In a local directory, a link to a
    directory is not followed (a warning names it) and a broken link is an error: neither is a silent gap.

    Raises:
        DerivedIndexError: the store's listing gives no size for a file, or a local file is a broken link.
    """
    remote = is_remote(root)
    if not remote:
        path = local_path(root)
        if not os.path.isdir(path):
            return []
        prefix = path.rstrip(os.sep) + os.sep
    else:
        prefix = root.rstrip('/') + '/'
    found = []
    broken: list[str] = []
    linked: list[str] = []
    local = {} if remote else {'broken': broken, 'linked_dirs': linked}
    for item in list_with_stats(prefix, timeout=timeout, retries=retries, options=options, **local):
        url = item.url if remote else local_path(item.url)
        if not url.startswith(prefix):
            continue
        name = url[len(prefix):]
        if not remote:
            name = name.replace(os.sep, '/')
        if not name or _hidden(name):
            continue
        found.append(source_file(name, item.stat, root))
    _check_links(prefix, broken, linked)
    return sorted(found, key=lambda item: item.name)


#: The longest :func:`settled_listing` waits for files just written (a server clock ahead of ours dates them later).
SETTLE_WAIT = 3.0


def settled_listing(root: str, *, timeout: float = 60.0, retries: int = 2,
                    options: dict[str, Any] | None = None) -> list[SourceFile]:
    """:func:`list_source`, taken once the files of a store that dates them without an etag (SFTP, to the second)
    are :data:`~streaming_core.reading.cache_record.COARSE_MARGIN` old: a same-size rewrite within a file's dated
    time lists the same, so a listing taken sooner could be kept for the old bytes while the file holds new ones.
    Once that time has passed, a later rewrite is dated later, and each download's check of the file's size and time
    sees it. Waits at most :data:`SETTLE_WAIT` seconds in all (a file dated in the future is then taken as it is; a
    server clock more than the margin behind ours dates a fresh file as settled, and a rewrite within its second is
    then not seen)."""
    deadline = time.monotonic() + SETTLE_WAIT
    while True:
        files = list_source(root, timeout=timeout, retries=retries, options=options)
        if not is_remote(root):  # nanosecond times and the change time: a rewrite always shows
            return files
        dated = (coarse_mtime(f'stat:mtime={item.mtime}') for item in files if not item.etag and item.mtime)
        newest = max((t for t in dated if t is not None and t != float('inf')), default=0.0)  # unreadable: not dated
        wait = newest + COARSE_MARGIN - time.time()
        if wait <= 0 or time.monotonic() + wait > deadline:
            return files
        logger.debug('waiting %.1f s for files of %s written just now (dated without an etag)', wait,
                     redact_url(root))
        time.sleep(wait)


def _check_links(prefix: str, broken: list[str], linked: list[str]) -> None:
    """Refuse the broken links of a local listing and warn of the linked directories it did not follow (hidden names
    and writers' artifacts aside, as for files)."""
    def shown(paths: list[str]) -> list[str]:
        names = [local_path(path)[len(prefix):].replace(os.sep, '/') for path in paths]
        return [name for name in names if name and not _hidden(name)]
    bad = shown(broken)
    if bad:
        raise DerivedIndexError(f'{prefix}: {", ".join(repr(name) for name in bad[:5])}'
                                f'{f" and {len(bad) - 5} more" if len(bad) > 5 else ""} '
                                f'{"is a broken symbolic link" if len(bad) == 1 else "are broken symbolic links"} '
                                f'(to {os.readlink(os.path.join(prefix, bad[0]))!r}): its data would be left out. '
                                f'Mount or restore the target, or remove the link.')
    skipped = shown(linked)
    if skipped:
        logger.warning('%s: %s %s a link to a directory, not followed: its files are not read (point a stream at its '
                       'target, or move the files in).', prefix, ', '.join(repr(name) for name in skipped[:5]),
                       'is' if len(skipped) == 1 else 'are each')


def source_file(name: str, stat: Any, root: str) -> SourceFile:
    """The listing entry of the file ``name`` of ``root`` from its :class:`~streaming_core.storage.facade.ObjectStat`
    (a local file's change time joins its modification time: replaced in place with its old mtime restored, it is
    still another entry).

    Raises:
        DerivedIndexError: the stat gives no size.
    """
    if stat.size is None:
        raise DerivedIndexError(f'The listing of {redact_url(root)} gives no size for {name}; its storage backend '
                                f'cannot describe files for a derived index. Write an index.json instead.')
    mtime = stat.mtime if stat.ctime is None else f'{stat.mtime}/{stat.ctime}'
    return SourceFile(name, int(stat.size), stat.etag, mtime)


def local_entry(name: str, path: str, root: str) -> list[Any] | None:
    """The listing entry of the local file ``name`` at ``path`` (of the directory ``root``) as it is now (None: it
    does not exist)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return source_file(name, ObjectStat(size=info.st_size, mtime=str(info.st_mtime_ns), inode=info.st_ino,
                                        ctime=str(info.st_ctime_ns)), root).key()
