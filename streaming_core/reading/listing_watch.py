"""A job never serves a file replaced on the remote under an index derived from the listing of the files.

A stream without ``index.json`` (Parquet, WebDataset) reads an index derived from the listing of its directory
(names, sizes, etags or modification times; :mod:`streaming_core.reading.derived_index`). Its files carry no hashes,
so a file replaced on the remote with the same name and size after the index was derived would be downloaded and
served under the old index: other rows in the same row groups, with no error. Each download of such a file is
therefore checked before it is renamed into place (:func:`listing_check`, given to
:func:`~streaming_core.storage.facade.download_file`): the remote file is identified again (one ``stat``, a request
next to the download of a data file; a listing of that name on a backend without ``stat``) and compared with the
entry the index was derived from. Another version discards the download and stops the job with
:class:`~streaming_core.errors.DatasetVersionError`; a failed check discards it too, so nothing unchecked is ever
in place for another process to open.

A stat and a listing may describe one version differently (a listing's modification time in milliseconds, a stat's
in seconds; GCS's generation in one, its MD5 etag in the other), so only what both state in one form is compared:
the size, etags of the same kind, else the modification times to the second (:func:`agrees`). A local remote's file
is compared by its size and modification time in nanoseconds (its change time, which a ``chmod``, a ``chown`` or a
hard link moves, left out), and its copy by the print taken when the index was derived
(:mod:`streaming_core.reading.tail_prints`); a file read in place by its print too, where its stat cannot tell.

A rebuild of the derived index by another process of the node (a newer job) notes a purge when an entry it knew
changed or disappeared, so a job on the old index stops before opening such a file, downloaded or not
(:mod:`streaming_core.reading.version_guard`). An ``hf://`` stream's listing is a commit's and never changes.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

from streaming_core.common.paths import state_dir
from streaming_core.errors import DatasetVersionError
from streaming_core.reading.cache_record import file_identity
from streaming_core.reading.derived_index import DERIVED_LISTING_NAME, local_entry, read_listing
from streaming_core.reading.listing_entries import KEPT_VERSIONS, entries_by_name, read_version_entries, same_data_entry
from streaming_core.reading.tail_prints import RACY_NS, print_verdict, read_prints
from streaming_core.storage.facade import ObjectStat, is_remote, join, list_with_stats, local_path, stat_object
from streaming_core.storage.redact import redact_url

__all__ = ['listing_check', 'agrees', 'check_in_place', 'remember_version']

#: Per state directory: the listing record's file identity, and its entries by name (read once per version).
_records: dict[str, tuple[Any, str | None, dict[str, list[Any]]]] = {}
#: Per (state directory, listing identity): that version's entries by name, or None when they were not kept.
_versions: dict[tuple[str, str], dict[str, list[Any]] | None] = {}
#: Per (state directory, listing identity): the prints of its files' tails, or None when none were kept.
_prints: dict[tuple[str, str], dict[str, Any] | None] = {}
#: Per (state directory, listing identity, name): the entry of a file read in place whose print was last found
#: right, when that check came after its change time could still stay put (no print taken again for that stat).
_passed: dict[tuple[str, str, str], list[Any]] = {}
_KIND = re.compile(r'([a-z]+):')


def _own_entries(sdir: str, identity: str) -> dict[str, list[Any]] | None:
    """The entries of the listing version ``identity`` by name: kept by identity, else the latest listing's when it is
    that version (then remembered as this version's); None when neither (removed after newer versions were built)."""
    key = (sdir, identity)
    found = _versions.get(key)
    if found is None:
        found = read_version_entries(sdir, identity)
        if found is None:
            latest, entries = _latest(sdir)
            found = entries if latest == identity else None
        if found is not None:
            _versions[key] = found
    return found


def remember_version(stream: Any) -> None:
    """Read the entries and prints of the listing version a stream's derived index was built from, when it is loaded:
    forked DataLoader workers inherit them, even after newer versions of the directory's index replaced them."""
    identity = str(getattr(stream, 'index_identity', None) or '')
    if identity.startswith('derived:'):
        sdir = getattr(stream, 'purge_dir', None) or state_dir(stream.local_dir, create=False)
        if _own_entries(sdir, identity) is not None and not is_remote(stream.remote_dir or stream.local_dir):
            _prints_of(sdir, identity)


def _prints_of(sdir: str, identity: str) -> dict[str, Any] | None:
    key = (sdir, identity)
    if key not in _prints:
        _prints[key] = read_prints(sdir, identity)
    return _prints[key]


def _gone(stream: Any, name: str) -> DatasetVersionError:
    return DatasetVersionError(
        f'The record of the listing {stream!r}\'s index was derived from is gone (the directory was listed '
        f'with other files or file versions more than {KEPT_VERSIONS} times since this job started), so {name} '
        f'cannot be checked against it; it is not read unchecked. Restart the job to read the current version.')


def _latest(sdir: str) -> tuple[str | None, dict[str, list[Any]]]:
    """The identity and the entries by name of the latest listing record in ``sdir`` (read once per version of the
    record: this runs before every download, and before every open of a file read in place)."""
    stamp = file_identity(os.path.join(sdir, DERIVED_LISTING_NAME))
    cached = _records.get(sdir)
    if cached is not None and cached[0] == stamp:
        return cached[1], cached[2]
    record = read_listing(sdir)
    identity = record.get('identity') if record is not None else None
    entries = entries_by_name(record['files'] if record is not None else [])
    _records[sdir] = (stamp, identity, entries)
    return identity, entries


def _seconds(value: Any) -> float | None:
    """A modification time as POSIX seconds: a number (seconds, or milli-, micro- or nanoseconds by its size; a local
    entry's ``mtime_ns/ctime_ns``), an ISO 8601 or an HTTP date; None when it is none of these."""
    text = str(value).split('/', 1)[0].strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:  # today in s is about 1.8e9: in ms 1.8e12, in us 1.8e15, in ns 1.8e18
        for threshold, per_second in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if abs(number) >= threshold:
                return number / per_second
        return number
    try:
        moment = datetime.fromisoformat(text.replace('Z', '+00:00'))
    except ValueError:
        pass
    else:  # a time without a zone is UTC, as stores give them (Azure Data Lake's listing), never the host's zone
        return (moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)).timestamp()
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def _bare(etag: str) -> str:
    return etag.removeprefix('W/').strip('"')


def agrees(entry: list[Any], stat: ObjectStat) -> bool:
    """Whether a remote object's ``stat`` describes the version of a listing ``entry`` (``[name, size, etag,
    mtime]``): the same size; etags of the same kind (plain, or ``generation:``, ``commit:``... prefixed) equal, else
    modification times within a second of each other; nothing else comparable, the size alone."""
    _, size, etag, mtime = entry
    if stat.size is not None and size is not None and int(stat.size) != int(size):
        return False
    if etag and stat.etag:
        kinds = [found.group(1) if (found := _KIND.match(str(e))) else '' for e in (etag, stat.etag)]
        if kinds[0] == kinds[1]:
            return _bare(str(etag)) == _bare(str(stat.etag))
    if mtime and stat.mtime:
        then, now = _seconds(mtime), _seconds(stat.mtime)
        if then is not None and now is not None:
            return abs(then - now) < 1.0
    return True


def _local_verdict(sdir: str, identity: str, name: str, path: str, root: str, entry: list[Any],
                   copy: str | None = None) -> str | None:
    """None when the local file ``name`` at ``path`` is still the version ``entry`` describes, else what it is now:
    its size and modification time, then its print where its stat cannot tell, or where ``copy`` (a copy of it about
    to be put in place) is what will be read (:mod:`streaming_core.reading.tail_prints`)."""
    now = local_entry(name, path, root)
    if now is None:
        return 'removed'
    if not same_data_entry(entry, now):
        return f'replaced (listed as {entry[1:]}, now {now[1:]})'
    key = (sdir, identity, name)
    if copy is None and _passed.get(key) == now:
        return None
    prints = _prints_of(sdir, identity)
    if prints is None and (copy is not None or str(entry[3]) != str(now[3])):  # a print is needed, and gone
        raise DatasetVersionError(
            f'The print of {path} taken with the listing this job\'s index was derived from is gone (removed with '
            f'that listing\'s record after the directory was listed with other files or file versions more than '
            f'{KEPT_VERSIONS} times), so a rewrite of it that kept its size and modification time could not be '
            f'seen; it is not read unchecked. Restart the job to read the current version.')
    if prints is None:
        return None
    checked_at = time.time_ns()  # before the print: a write that keeps the stat came before it
    verdict = print_verdict(prints, entry, now, copy or path, copy=copy is not None)
    ctime = str(now[3]).split('/', 1)[-1]
    if verdict is None and copy is None and ctime.isdigit() and checked_at - int(ctime) >= RACY_NS:
        _passed[key] = now  # from now on, a write moves the change time
    return verdict


def _verdict(stream: Any, name: str, entry: list[Any], sdir: str, identity: str, copy: str) -> str | None:
    """None when the remote file ``name`` is still the version ``entry`` describes (and ``copy``, its download, holds
    its bytes as far as a local remote's print tells), else what it is now."""
    root = stream.remote_dir
    if not is_remote(root):
        return _local_verdict(sdir, identity, name, os.path.join(local_path(root), *name.split('/')), root, entry,
                              copy)
    url = join(root, name)
    timeout, retries = float(stream.download_timeout or 60.0), int(stream.download_retry or 0)
    try:
        found = stat_object(url, timeout=timeout, retries=retries, options=stream.storage_options)
    except FileNotFoundError:
        return 'removed'
    if found is None:  # a backend without stat: list that one name
        listed = [item.stat for item in list_with_stats(url, timeout=timeout, retries=retries,
                                                        options=stream.storage_options) if item.url == url]
        if not listed:
            return 'removed'
        found = listed[0]
    return None if agrees(entry, found) else f'replaced (listed as {entry[1:]}, now {found.identity})'


def listing_check(stream: Any, name: str) -> Callable[[str], None] | None:
    """What a download of the file ``name`` of ``stream`` must pass before it is renamed into place, when the
    stream's index is derived from its remote's listing (else None): the remote file is still the version the index
    was derived from.

    The returned function raises :class:`~streaming_core.errors.DatasetVersionError` when it was replaced or removed
    meanwhile, and a storage error when the remote cannot tell.
    """
    identity = str(getattr(stream, 'index_identity', None) or '')
    if not identity.startswith('derived:') or not stream.remote_dir:
        return None
    sdir = getattr(stream, 'purge_dir', None) or state_dir(stream.local_dir, create=False)
    entries = _own_entries(sdir, identity)
    if entries is None:
        raise _gone(stream, name)
    entry = entries.get(name)
    if entry is None:  # not a file of the listing (a foreign index's shards): nothing to compare
        return None

    def check(copy: str) -> None:
        verdict = _verdict(stream, name, entry, sdir, identity, copy)
        if verdict is not None:
            raise DatasetVersionError(
                f'The data of {stream!r} changed while this job read it: {redact_url(join(stream.remote_dir, name))} '
                f'was {verdict} after this job\'s index was derived from the listing of its files. Reading on would '
                f'serve the new file under the old index. Restart the job to read the new version; write new '
                f'versions of a dataset to new directories.')
    return check


#: Ends the identity of an index a local copy of a remote is read through without the remote
#: (:mod:`streaming_core.reading.local_only`): its files were checked against the remote's listing when downloaded
#: and are replaced only by a rename, so :func:`check_in_place` does not apply to them.
COPY_SUFFIX = ';local-copy'


def check_in_place(stream: Any, name: str, path: str) -> None:
    """Before a file of a stream read in place (no remote copy) is opened: when the stream's index is derived from
    the directory's listing, the file must still be the version that listing named (its size and modification time;
    one ``stat``). A local ``index.json`` read in place is watched the same way by
    :mod:`streaming_core.reading.version_guard`.

    Raises:
        DatasetVersionError: the file was replaced or removed since the index was derived.
    """
    identity = str(getattr(stream, 'index_identity', None) or '')
    if not identity.startswith('derived:') or identity.endswith(COPY_SUFFIX):
        return
    sdir = getattr(stream, 'purge_dir', None) or state_dir(stream.local_dir, create=False)
    entries = _own_entries(sdir, identity)
    if entries is None:
        raise _gone(stream, path)
    entry = entries.get(name)
    if entry is None:
        return
    verdict = _local_verdict(sdir, identity, name, path, stream.local_dir, entry)
    if verdict is not None:
        raise DatasetVersionError(
            f'The data of {stream!r} changed while this job read it: {path} was {verdict} after this job\'s '
            f'index was derived from the listing of its directory. Reading on would serve the new file under the old '
            f'index. Restart the job to read the new version; write new versions of a dataset to new directories.')
