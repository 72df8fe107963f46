"""The record of what a local directory holds: which remote, and which version of its index.

A stream with a remote keeps, in the state directory of its local directory
(:func:`streaming_core.common.paths.state_dir`, never inside the local directory itself), a small JSON record:

* ``remote`` / ``remote_dir``: the remote (and the remote of the split) in redacted form, for people and for
  ``streaming cache``;
* ``remote_key``: a digest of the exact remote location (credentials removed), used to compare remotes;
* ``source_identity``: the identity of the remote index version the directory holds: the store's etag, size and
  modification time when its backend can tell (local paths: size, mtime_ns and inode), else ``sha256:<digest>`` of
  the index bytes;
* ``index_sha256`` and ``index_stat``: the digest of the cached ``index.json`` bytes and its local
  ``(size, mtime_ns, inode, ctime_ns)`` when the record was written (a local copy changed behind our back is noticed);
* ``checked_at`` / ``written_at``: when the remote was last compared and when the record was written.

The record is written to a temporary name and renamed into place, under the stream's index lock
(see :mod:`streaming_core.reading.index_sync`), so readers never see half a record.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from streaming_core.common.paths import same_place, state_dir, without_credentials
from streaming_core.errors import StreamingError
from streaming_core.storage.facade import is_remote, local_path, write_file_atomic
from streaming_core.storage.redact import redact_url

__all__ = ['CacheRecord', 'in_place_record', 'CacheRemoteMismatchError', 'RECORD_NAME', 'RECORD_VERSION', 'read_record',
           'same_version', 'file_id_text', 'write_record', 'remote_key', 'path_key', 'remote_keys', 'file_identity',
           'stat_identity', 'FileIdentity', 'sha256_hex', 'is_in_place', 'record_of', 'coarse_mtime', 'COARSE_MARGIN',
           'DIGEST_PART']

#: File name of the record inside a state directory.
RECORD_NAME = 'record.json'
#: Version of the record's layout.
RECORD_VERSION = 1

#: ``(size, mtime_ns, inode, ctime_ns)`` of a local file (see :func:`file_identity`).
FileIdentity = tuple[int, int, int, int]


class CacheRemoteMismatchError(StreamingError, ValueError):
    """A local directory already holds another remote's data (``ValueError``, as the reference's "reused local
    directory" error)."""


def sha256_hex(data: bytes) -> str:
    """The SHA-256 hex digest of ``data``."""
    return hashlib.sha256(data).hexdigest()


def remote_key(remote_dir: str) -> str:
    """The comparison key of a remote location: local paths by their real path, URLs as written without credentials
    and signatures (a login or token rotated, added, dropped or moved into ``storage_options`` leaves the same remote:
    :func:`~streaming_core.common.paths.without_credentials`)."""
    if is_remote(remote_dir):
        return _url_key(redact_url(without_credentials(remote_dir.rstrip('/'))))
    return path_key(os.path.expanduser(local_path(remote_dir)))


def path_key(path: str) -> str:
    """The comparison key of a local directory given as a path (made absolute and resolved, ``~`` not expanded):
    :func:`remote_key` of a local-path remote is the key of its expanded path."""
    norm = 'file:' + os.path.realpath(os.path.abspath(path))
    return hashlib.blake2b(norm.encode('utf-8'), digest_size=16).hexdigest()


def _url_key(url: str) -> str:
    parts = urlsplit(url)
    query = '&'.join(p for p in parts.query.split('&') if p and not p.endswith('=***'))
    norm = urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
    return hashlib.blake2b(norm.encode('utf-8'), digest_size=16).hexdigest()


_USERINFO_MASK = re.compile(r'(?<=://)\*\*\*@')  # what redact_url leaves of user:password@


def remote_keys(remote_dir: str) -> set[str]:
    """:func:`remote_key` and the keys earlier versions recorded, so that a directory they recorded is not taken for
    another remote's: the first versions masked credentials instead of removing them, and later ones kept a bare
    ``user@`` of a login scheme (``https://alice@host/``)."""
    keys = {remote_key(remote_dir)}
    if is_remote(remote_dir):
        url = remote_dir.rstrip('/')
        keys.add(hashlib.blake2b(redact_url(url).encode('utf-8'), digest_size=16).hexdigest())
        keys.add(_url_key(_USERINFO_MASK.sub('', redact_url(url))))
    return keys


def is_in_place(remote_dir: str | None, local_dir: str) -> bool:
    """Whether the remote is the local directory itself (a dataset read in place: nothing to copy or refresh)."""
    if not remote_dir or is_remote(remote_dir):
        return False
    return same_place(local_path(remote_dir), local_dir)


def file_identity(path: str) -> FileIdentity | None:
    """``(size, mtime_ns, inode, ctime_ns)`` of a local file, or ``None`` when it does not exist.

    The change time is part of it because a file rewritten in place can keep its size and get its old modification
    time back (``cp -p``, ``rsync -t --inplace``, ``touch -r``); no call sets the change time."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return stat_identity(info)


def file_id_text(ident: FileIdentity) -> str:
    """The index identity of a local ``index.json`` with the file identity ``ident``."""
    return f'file:size={ident[0]};mtime_ns={ident[1]};inode={ident[2]};ctime_ns={ident[3]}'


def stat_identity(info: os.stat_result) -> FileIdentity:
    """:func:`file_identity` of a file's ``os.stat`` result."""
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


@dataclass
class CacheRecord:
    """What a local directory holds (see the module docstring)."""

    local_dir: str
    remote: str
    remote_dir: str
    remote_key: str
    split: str | None
    source_identity: str
    index_sha256: str
    index_stat: list[int] | None
    checked_at: float
    written_at: float = field(default_factory=time.time)
    version: int = RECORD_VERSION

    @property
    def local_stat(self) -> FileIdentity | None:
        """:attr:`index_stat` as a tuple."""
        return tuple(self.index_stat) if self.index_stat else None  # type: ignore[return-value]

    def describe(self) -> str:
        """A one-line description for messages: the remote (and split)."""
        return self.remote_dir if not self.split else f'{self.remote_dir} (split {self.split!r})'

    @classmethod
    def from_json(cls, obj: Any) -> 'CacheRecord | None':
        """The record in ``obj``, or ``None`` when it is not a record this version understands."""
        if not isinstance(obj, dict) or obj.get('version') != RECORD_VERSION:
            return None
        try:
            return cls(local_dir=str(obj['local_dir']), remote=str(obj['remote']), remote_dir=str(obj['remote_dir']),
                       remote_key=str(obj['remote_key']), split=obj.get('split'),
                       source_identity=str(obj['source_identity']), index_sha256=str(obj['index_sha256']),
                       index_stat=[int(v) for v in obj['index_stat']] if obj.get('index_stat') else None,
                       checked_at=float(obj['checked_at']), written_at=float(obj.get('written_at') or 0.0))
        except (KeyError, TypeError, ValueError):
            return None


def in_place_record(local_dir: str, split: str | None, identity: str, index_sha256: str) -> CacheRecord:
    """The record of ``local_dir`` as a dataset of its own (read in place, or written there with no remote): its
    remote is its absolute path, as written (its real path would name another directory from elsewhere)."""
    here = os.path.abspath(local_dir)
    return CacheRecord(local_dir=os.path.realpath(local_dir), remote=here, remote_dir=here,
                       remote_key=remote_key(local_dir), split=split, source_identity=identity,
                       index_sha256=index_sha256, index_stat=None, checked_at=time.time())


def record_written_in_place(local_dir: str, text: bytes | None = None) -> None:
    """Record the directory a writer just committed (``index.json``, whose bytes are ``text``; None: hashed from the
    file in chunks, as a merged index of any size is) with no remote as a dataset of its own, as reading it in place
    would: passed by mistake as the ``local`` of another remote, it is refused (naming this record), never adopted as
    that remote's cache with its files replaced. A cache root that cannot be written only loses this protection."""
    index = os.path.join(local_dir, 'index.json')
    try:
        ident = file_identity(index)
        if ident is None:
            return
        if text is None:  # in chunks: a mapped file's pages would count in the merge's resident memory
            digest = hashlib.sha256()
            with open(index, 'rb') as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b''):
                    digest.update(chunk)
            index_sha256 = digest.hexdigest()
        else:
            index_sha256 = sha256_hex(text)
        write_record(state_dir(local_dir), in_place_record(local_dir, None, file_id_text(ident), index_sha256))
    except OSError:
        pass


def forget_record(local_dir: str) -> None:
    """Remove the record of ``local_dir`` (a writer replaced its contents with a remote's new dataset: the directory
    is then a copy of unknown provenance, adopted by the first read of that remote)."""
    try:
        os.remove(os.path.join(state_dir(local_dir, create=False), RECORD_NAME))
    except OSError:
        pass


def read_record(directory: str) -> CacheRecord | None:
    """The record in the state directory ``directory``; ``None`` when there is none or it is unreadable (a record
    this version cannot read is treated as absent: the directory is then adopted again by comparing with the
    remote)."""
    try:
        with open(os.path.join(directory, RECORD_NAME), 'rb') as handle:
            return CacheRecord.from_json(json.loads(handle.read()))
    except (OSError, ValueError):
        return None


def write_record(directory: str, record: CacheRecord) -> None:
    """Write ``record`` into the state directory ``directory`` atomically (temporary name, then rename)."""
    path = os.path.join(directory, RECORD_NAME)
    record.written_at = time.time()
    write_file_atomic(path, json.dumps(asdict(record), indent=1, sort_keys=True).encode('utf-8'), sync=False)


def record_of(local_dir: str) -> CacheRecord | None:
    """The record of a local directory (for tools such as ``streaming cache``); ``None`` when it has none."""
    return read_record(state_dir(local_dir, create=False))


_CTIME = re.compile(r';ctime=\d+')


#: Seconds after a coarse stat's modification time (see :func:`coarse_mtime`) before a check of the index trusts that
#: stat to name the version it read: a write in the same second keeps the stat (and a server's clock may differ).
COARSE_MARGIN = 2.0
#: What an identity made of a coarse stat adds: the digest of the index bytes read under it (one stat may name two
#: versions written in one second; the digest tells them apart).
DIGEST_PART = ';sha256='


def coarse_mtime(identity: str) -> float | None:
    """The modification time (seconds since the epoch) of a remote stat identity that has neither an etag nor an
    inode, so that another write within that second, of the same size, gives the same stat (a web server's
    ``Last-Modified`` without ``ETag``, SFTP's ``st_mtime``, DBFS's ``modification_time`` in milliseconds).
    ``None`` for any other identity; ``inf`` when the time cannot be read (never trusted alone).
    """
    if not identity.startswith('stat:') or 'etag=' in identity or 'inode=' in identity:
        return None
    stat = identity[len('stat:'):].split(DIGEST_PART, 1)[0]
    text = next((part[len('mtime='):] for part in stat.split(';') if part.startswith('mtime=')), None)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        from datetime import datetime
        from email.utils import parsedate_to_datetime
        for parse in (lambda t: parsedate_to_datetime(t).timestamp(), lambda t: datetime.fromisoformat(t).timestamp()):
            try:
                return parse(text)
            except (TypeError, ValueError):
                continue
        return float('inf')
    while value > 1e11:  # milliseconds, microseconds or nanoseconds since the epoch (1e11 s is the year 5138)
        value /= 1000
    return value


def same_version(a: str, b: str) -> bool:
    """Whether two index identities name one version: equal, or equal but for the change time, which the identities
    a local remote's stat gave before version 0.2 lack (so an upgrade does not take every cached file for stale).
    A bare stat (a probe) and an identity that adds the digest of the bytes read under that stat
    (:data:`DIGEST_PART`) compare by the stat; two identities with digests compare whole."""
    if a == b:
        return True
    if (DIGEST_PART in a) != (DIGEST_PART in b):
        a, b = a.split(DIGEST_PART, 1)[0], b.split(DIGEST_PART, 1)[0]
        if a == b:
            return True
    older = [x for x in (a, b) if not _CTIME.search(x)]
    return len(older) == 1 and _CTIME.sub('', a) == _CTIME.sub('', b)
