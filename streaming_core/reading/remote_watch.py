"""A job that downloads from a remote rewritten under it never serves the new version's files under its old index.

A job alone on its local directory downloads each shard when it first needs it (and again after an eviction), from
the remote its index came from. When that remote is rewritten meanwhile, with the same file names and sizes (fixed-size
samples, tokenized sequences of one length), the size check passes and the new version's samples would be served
under the old index. Before a shard download, a stream whose index version is named by the remote ``index.json``'s
stat (``stat:``, an object store or a local path) stats it again: an object store at most every :data:`RECHECK_SECONDS`
per stream and process (one request), a path remote (a local or mounted directory) before every download; a remote
with no ``index.json`` (deleted, or a writer rewriting it) counts as changed. Once
it has changed, every later download of the stream is checked against the hash this
job's index records for the file (the file may be unchanged: a dataset extended in place), and a file without a
recorded hash stops the job, since nothing can tell which version it holds.

A download is also checked against a fast hash (:data:`FAST_HASHES`, negligible next to a download) whenever the
job's index records one, whether or not the remote was seen to change: that covers the up to
:data:`RECHECK_SECONDS` before the next stat, and files rewritten before their ``index.json`` is (a writer commits its
index last). A mismatch stats the remote index at once: changed, the job stops with
:class:`~streaming_core.errors.DatasetVersionError`; unchanged, the remote file is corrupt (``HashMismatchError``).

What this cannot see: in an index without hashes, files rewritten with equal sizes and downloaded in those windows.
Streams whose version is a commit (``hf://``) or a listing of their files (Parquet, WebDataset) are not re-checked
here: a commit never changes, and a listed file is checked after its download by
:mod:`streaming_core.reading.listing_watch`.
"""

from __future__ import annotations

import time
from typing import Any

from streaming_core.errors import DatasetVersionError
from streaming_core.reading.cache_record import same_version
from streaming_core.storage.hashing import HASH_PREFERENCE
from streaming_core.storage.redact import redact_url
from streaming_core.storage.url import is_remote

__all__ = ['RECHECK_SECONDS', 'HASH_PREFERENCE', 'FAST_HASHES', 'expected_hash_after_change', 'fast_hash',
           'changed_now']

#: How often (at most, per stream and process) a download confirms that the remote index is the job's version.
RECHECK_SECONDS = 10.0
#: Hashes checked on every download when the index records one (the first found), so cheap to compute that the
#: check costs nothing next to the download.
FAST_HASHES = ('xxh3_64', 'xxh64', 'xxh3_128', 'xxh128')


def _remote_changed(stream: Any) -> str | None:
    """The remote index's identity when it is no longer the stream's version (an object store's checked at most
    every :data:`RECHECK_SECONDS`, a path remote's at every call; once changed, always), else None."""
    changed = getattr(stream, '_remote_index_now', None)
    if changed is not None:
        return changed
    identity = getattr(stream, 'index_identity', None)
    if not identity or not identity.startswith('stat:') or not stream.remote_dir:
        return None
    now = time.time()  # not monotonic: the stream may be pickled to another machine (a Ray or Spark executor)
    if 0 <= now - getattr(stream, '_remote_confirmed_at', 0.0) < RECHECK_SECONDS and is_remote(stream.remote_dir):
        return None  # a path remote (a local or mounted directory) is statted before every download: it costs a stat
    from streaming_core.reading.index_sync import probe_remote_index
    found = probe_remote_index(stream)
    stream._remote_confirmed_at = time.time()
    if found is None or same_version(found, identity):
        return None
    stream._remote_index_now = found
    return found


def expected_hash_after_change(stream: Any, info: Any, basename: str) -> tuple[str, str] | None:
    """Before downloading ``basename`` (``info``: its entry in the job's index): None while the remote index is the
    job's version; after it changed, the ``(algorithm, digest)`` the download must match.

    Raises:
        DatasetVersionError: the remote index changed and the job's index records no hash for the file.
    """
    changed = _remote_changed(stream)
    if changed is None:
        return None
    hashes = getattr(info, 'hashes', None) or {}
    for name in HASH_PREFERENCE:
        if name in hashes:
            return name, hashes[name]
    if hashes:
        name = sorted(hashes)[0]
        return name, hashes[name]
    raise DatasetVersionError(
        f'The data of {stream!r} changed while this job read it: {redact_url(stream.remote_dir)}/index.json is now '
        f'{changed} (this job reads {stream.index_identity}), and this job\'s index records no hash for {basename}, '
        f'so nothing tells which version a download of it would be. Restart the job to read the new version; write '
        f'new versions of a dataset to new directories (or record hashes: MDSWriter(hashes=[...])).')


def fast_hash(info: Any) -> tuple[str, str] | None:
    """The ``(algorithm, digest)`` of the first of :data:`FAST_HASHES` that ``info`` (a file's index entry) records."""
    hashes = getattr(info, 'hashes', None) or {}
    for name in FAST_HASHES:
        if name in hashes:
            return name, hashes[name]
    return None


def changed_now(stream: Any) -> str | None:
    """The remote index's identity when it is no longer the stream's version, statted now (a download did not match
    the recorded hash: a rewrite, or a corrupt remote file), else None."""
    stream._remote_confirmed_at = 0.0
    return _remote_changed(stream)
