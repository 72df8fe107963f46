"""Indexes derived from the data: a stream whose directory has no ``index.json`` but holds files an *index builder*
can index (``*.parquet``) is read through an index built from the files themselves.

Called by :mod:`streaming_core.reading.index_sync` under the stream's index lock, so one process per node builds it. The
derived index is a pure function of the builder and the sorted listing of the directory (names, sizes, etags /
modification times): its identity is the digest of that listing (``derived:<builder>:<sha256>``). It is kept in the
local directory's state directory (:func:`streaming_core.common.paths.state_dir`), never in the user's directory, next
to the listing it was built from, and rebuilt when the listing changes. When the stream copies files from a remote,
every local copy of a file whose listing entry changed or disappeared is removed before the new index is installed,
so a replaced remote file is never served from a stale copy.

Choosing the builder: ``format=`` names one (its files are selected by its patterns; other files are ignored);
otherwise the builders whose patterns match the listing are found and exactly one must match. An empty directory,
a directory with no file any builder indexes, or one with files of several builders is an error saying what was
found and what to pass.

Foreign ``index.json`` files (litdata's) are derived the same way by
:mod:`streaming_core.reading.foreign_index`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from streaming_core.errors import FormatOptionError, PermanentStorageError, StreamingError, UnknownNameError
from streaming_core.reading.cache_record import file_identity
from streaming_core.reading.index_file import (
    index_text,
    parse_index_text,
)
from streaming_core.reading.listing_entries import (
    changed_data,
    read_version_entries,
    same_data_entry,
    stale_copies,
    write_version_entries,
)
from streaming_core.reading.source_listing import (  # noqa: F401 (names this module has always offered)
    SETTLE_WAIT,
    DerivedIndexError,
    ForeignIndexError,
    ListingUnavailableError,
    NoDatasetError,
    NoLocalDatasetError,
    SourceFile,
    list_source,
    local_entry,
    settled_listing,
    source_file,
)
from streaming_core.reading.tail_prints import read_prints, take_prints, write_prints
from streaming_core.storage.facade import (
    is_remote,
    join,
    local_path,
    read_range,
    write_file_atomic,
)
from streaming_core.storage.redact import redact_url

__all__ = ['SourceFile', 'RangeReader', 'DerivedIndexError', 'ForeignIndexError', 'ListingUnavailableError',
           'DERIVED_INDEX_NAME', 'DERIVED_LISTING_NAME', 'list_source', 'choose_builder', 'listing_identity',
           'derive_index', 'builder_matches', 'build_index', 'FormatOptionError', 'configure_builder',
           'describe_options', 'kept_index', 'read_listing', 'build_with', 'write_listing', 'write_record',
           'FileProgress', 'source_file', 'settled_listing', 'SETTLE_WAIT']

logger = logging.getLogger('streaming_core.reading.derived_index')

#: The derived index's file name in the state directory.
DERIVED_INDEX_NAME = 'derived-index.json'
#: The listing the derived index was built from (identity, builder, files), in the state directory.
DERIVED_LISTING_NAME = 'derived-listing.json'

#: ``read(name, start, length) -> bytes``: a ranged read of one listed file (``name`` relative to the directory).
RangeReader = Callable[[str, int, int], bytes]


def builder_matches(builder: Any, files: Sequence[SourceFile], *, ignore_case: bool = False) -> list[SourceFile]:
    """The files whose names match one of ``builder.patterns`` (fnmatch, on the relative name and its base name;
    ``ignore_case``: in any case)."""
    patterns = tuple(builder.patterns)
    if not patterns:
        return []
    match = re.compile('|'.join(fnmatch.translate(p) for p in patterns), re.IGNORECASE if ignore_case else 0).match
    return [item for item in files if match(item.name) or match(item.name.rsplit('/', 1)[-1])]


def _chosen(name: str, builder: Any, selected: list[SourceFile], files: Sequence[SourceFile],
            where: str) -> tuple[str, Any, list[SourceFile]]:
    """The builder's choice, after a warning naming the files it would read but for the case of their names
    (``PART-1.PARQUET``): they are not read, and that must not pass unnoticed."""
    chosen = {item.name for item in selected}
    rest = [item for item in files if item.name not in chosen]  # (most files are chosen: no pattern run on them)
    other = builder_matches(builder, rest, ignore_case=True) if rest else []
    if other:
        logger.warning('%s: %s %s not read as %s: the extension is matched in lower case (%s); rename %s.', where,
                       _summary(other), 'is' if len(other) == 1 else 'are', name, ', '.join(builder.patterns),
                       'it' if len(other) == 1 else 'them')
    return name, builder, selected


def _only_sidecars(builder: Any, files: Sequence[SourceFile]) -> bool:
    """Whether ``files`` hold nothing but the builder's sidecar index (no data of its format; True when empty)."""
    sidecar = getattr(builder, 'sidecar_name', None)
    return all(item.name.rsplit('/', 1)[-1] == sidecar for item in files)


def _summary(files: Sequence[SourceFile], limit: int = 5) -> str:
    names = [item.name for item in files[:limit]]
    more = f' and {len(files) - limit} more' if len(files) > limit else ''
    return ', '.join(names) + more


def choose_builder(fmt: str | None, files: Sequence[SourceFile], where: str,
                   remembered: str | None = None) -> tuple[str, Any, list[SourceFile]]:
    """Pick the index builder for a directory without ``index.json``.

    Args:
        fmt: The ``format=`` the user gave (``None``: detect from the files).
        files: The directory's listing.
        where: The directory, for messages.
        remembered: The builder an earlier detection chose for the same file names and the same installed plugins
            (:func:`detection_key`): only that plugin is loaded, instead of every index builder.

    Returns:
        ``(builder name, builder, the files it indexes)``.

    Raises:
        UnknownNameError: ``fmt`` names no index builder (listing the installed ones).
        DerivedIndexError: nothing to index, or several formats and no ``format=``.
    """
    from streaming_core.machinery.lookup import get_registry
    registry = get_registry('index_builder')
    if fmt is not None:
        try:
            builder = registry.get(fmt)
        except UnknownNameError as err:
            raise UnknownNameError(f'format={fmt!r} for {where}: {err}') from None
        selected = builder_matches(builder, files)
        sidecar = getattr(builder, 'sidecar_name', None)
        if _only_sidecars(builder, selected):
            selected = []
        if not selected and not tuple(builder.patterns):
            raise DerivedIndexError(f'{where} has no index.json; the {fmt!r} index builder (format={fmt!r}) reads '
                                    f'only a directory\'s own index.json (of its format). Point `remote`/`local` at '
                                    f'the directory holding it.')
        if not selected:
            found = f'found {len(files)} other file(s): {_summary(files)}' if files else 'it is empty'
            wanted = [pattern for pattern in builder.patterns if pattern != sidecar]
            raise DerivedIndexError(f'{where} has no index.json and no {" or ".join(wanted)} file for '
                                    f'format={fmt!r} ({found}). Point `remote`/`local` at the directory holding the '
                                    f'files.')
        return _chosen(fmt, builder, selected, files, where)
    if remembered is not None and files:
        builder = registry.get(remembered) if remembered in registry else None
        if builder is not None:
            selected = builder_matches(builder, files)
            if selected and not _only_sidecars(builder, selected):
                return _chosen(remembered, builder, selected, files, where)
    if not files:
        raise NoDatasetError(f'{where} has no index.json and no files. Point `remote`/`local` at a dataset '
                                f'directory (an index.json, or data files such as *.parquet with format=...).')
    matches = []
    for entry in registry.entries():
        selected = builder_matches(entry.obj, files)
        if not _only_sidecars(entry.obj, selected):
            matches.append((entry.name, entry.obj, selected))
    if len(matches) == 1:
        return _chosen(*matches[0], files, where)
    installed = ', '.join(registry.names()) or '(none)'
    if not matches:
        splits = sorted({item.name.split('/')[0] for item in files
                         if item.name.count('/') == 1 and item.name.endswith('/index.json')})
        if splits:
            raise DerivedIndexError(f'{where} has no index.json, but its subdirectories {splits} have one: they are '
                                    f'splits. Choose one: split={splits[0]!r} (Stream, StreamingDataset), or '
                                    f'--split {splits[0]} (streaming inspect, verify).')
        if any(item.name == 'index.json' for item in files):  # an index.json beside: the caller did not read it
            raise DerivedIndexError(f'{where} has an index.json: it is a dataset with an index already (read it, or '
                                    f'inspect it with streaming inspect; if a writer just committed it, construct '
                                    f'again); only a directory of files that index themselves (Parquet, '
                                    f'WebDataset) is indexed from its files.')
        raise DerivedIndexError(f'{where} has no index.json and none of its {len(files)} file(s) ({_summary(files)}) '
                                f'is of a format that indexes itself (installed index builders: {installed}). Write '
                                f'an index.json (streaming convert), or install the plugin of the format and pass '
                                f'format=NAME.')
    found = '; '.join(f'{len(sel)} {name} file(s) ({_summary(sel, 2)})' for name, _, sel in matches)
    raise DerivedIndexError(f'{where} has no index.json and holds files of several formats: {found}. Pass format= '
                            f'one of {[name for name, _, _ in matches]} to choose (--format NAME for streaming '
                            f'inspect, verify and index).')


def detection_key(files: Sequence[SourceFile]) -> str | None:
    """What the format detection of ``files`` depends on: their names and the installed index builders
    (:meth:`~streaming_core.machinery.name_registry.Registry.fingerprint`). None when the builders cannot be told
    apart from another process's (detection then runs in full)."""
    from streaming_core.machinery.lookup import get_registry
    fingerprint = get_registry('index_builder').fingerprint()
    if fingerprint is None:
        return None
    digest = hashlib.blake2s(fingerprint.encode(), digest_size=16)
    for item in files:
        digest.update(b'\0' + item.name.encode('utf-8', 'surrogateescape'))
    return digest.hexdigest()


def _remembered(listing: dict[str, Any] | None, key: str | None) -> str | None:
    """The builder the recorded ``listing`` detected under ``key``, if it did."""
    detected = listing.get('detected') if listing is not None and key is not None else None
    if isinstance(detected, dict) and detected.get('key') == key and isinstance(detected.get('builder'), str):
        return detected['builder']
    return None


def describe_options(options: dict[str, Any] | None) -> str:
    """A short, stable text of format options (``columns=id,text;split=train``): sorted by name, a list as its
    items joined by commas, ``True`` as the bare name; empty when there are none."""
    parts = []
    for key in sorted(options or {}):
        value = options[key]  # type: ignore[index]
        if value is True:
            parts.append(key)
        elif isinstance(value, (list, tuple)):
            parts.append(f'{key}={",".join(str(item) for item in value)}')
        elif isinstance(value, str):
            parts.append(f'{key}={value}')
        else:
            parts.append(f'{key}={json.dumps(value, sort_keys=True, separators=(",", ":"))}')
    return ';'.join(parts)


def configure_builder(name: str, builder: Any, options: dict[str, Any] | None, where: str) -> Any:
    """The index builder ``builder`` (registered as ``name``) configured with a stream's format options.

    A builder takes options by declaring ``option_names`` (the names it accepts) and a ``configure(options) ->
    builder`` method returning the builder to use (it checks the values). With no options, ``builder`` itself.

    Raises:
        FormatOptionError: an option the builder does not take (naming it, the format and the ones it takes), or
            a value ``configure`` refuses (its message, naming the format).
    """
    if not options:
        return builder
    accepted = tuple(getattr(builder, 'option_names', ()) or ())
    unknown = [key for key in options if key not in accepted]
    if unknown or not callable(getattr(builder, 'configure', None)):
        takes = f'it takes {", ".join(repr(key) for key in accepted)}' if accepted else 'it takes no options'
        raise FormatOptionError(
            f'format option {", ".join(repr(key) for key in (unknown or list(options)))} for {where}: the {name!r} '
            f'format does not take it ({takes}). Remove it from `format_options` / `columns`, or read the directory '
            f'with a format that has it.')
    try:
        return builder.configure(dict(options))
    except (TypeError, ValueError) as err:
        raise FormatOptionError(f'format_options={options!r} for {where} (format {name!r}): {err}') from None


def listing_identity(builder_name: str, files: Sequence[SourceFile], options: dict[str, Any] | None = None,
                     version: int | None = None) -> str:
    """The identity of a derived index: its builder, its format options and the digest of the sorted listing
    (``derived:parquet:<sha256>``, or ``derived:parquet[columns=id,text]:<sha256>`` with options): different
    options are a different index. ``version``: the builder's ``index_version`` (the layout it writes), hashed in
    when it declares one, so an index kept under another layout is rebuilt."""
    listing: list[Any] = [item.key() for item in sorted(files, key=lambda f: f.name)]
    if version is not None:
        listing = [['index_version', int(version)], *listing]
    if options:
        text = json.dumps([builder_name, listing, options], separators=(',', ':'), sort_keys=True)
        label = f'{builder_name}[{describe_options(options)}]'
    else:
        text = json.dumps([builder_name, listing], separators=(',', ':'))
        label = builder_name
    return f'derived:{label}:{hashlib.sha256(text.encode()).hexdigest()}'


def kept_index(path: str, listing: dict[str, Any] | None, identity: str) -> bytes | None:
    """The derived index kept at ``path`` when its recorded listing has ``identity`` and its bytes still match the
    recorded digest (else None: it is built again)."""
    if listing is None or listing.get('identity') != identity:
        return None
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == listing.get('index_sha256') else None


def read_listing(sdir: str) -> dict[str, Any] | None:
    """The listing recorded beside the derived index in ``sdir`` (None when absent or unreadable)."""
    try:
        with open(os.path.join(sdir, DERIVED_LISTING_NAME), 'rb') as handle:
            obj = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get('files'), list) else None


class FileProgress:
    """A progress bar of the files a builder has read (each counted once, from any thread), shown on a terminal
    once the build takes longer than :attr:`DELAY` seconds (indexing thousands of remote files takes seconds)."""

    #: Seconds before the bar appears; a quick build shows nothing.
    DELAY = 1.0

    def __init__(self, total: int, description: str) -> None:
        self.seen: set[str] = set()
        self._lock = threading.Lock()
        self._total = total
        self._description = description
        self._bar: Any = None

    def touched(self, name: str) -> None:
        """Count the file ``name`` as read (again: no change)."""
        with self._lock:
            if name in self.seen:
                return
            self.seen.add(name)
            if self._bar is None:
                from tqdm.auto import tqdm

                class Bar(tqdm):  # type: ignore[misc, valid-type]
                    monitor_interval = 0  # no tqdm monitor thread left behind in a process that forks workers

                self._bar = Bar(total=self._total, desc=self._description, unit=' files', delay=self.DELAY,
                                dynamic_ncols=True, leave=False)
            self._bar.update(1)

    def close(self) -> None:
        """Remove the bar (if it was shown)."""
        with self._lock:
            if self._bar is not None:
                self._bar.close()


def build_with(name: str, builder: Any, files: Sequence[SourceFile], source: str, *, timeout: float, retries: int,
           options: dict[str, Any] | None, preread: dict[str, bytes] | None = None) -> bytes:
    """Run ``builder`` over ``files`` of ``source`` and return the checked index text (every entry readable).
    ``preread`` holds files already read whole (served from memory)."""
    where = redact_url(source)
    known = preread or {}
    progress = FileProgress(len(files), f'Indexing {where}')

    def read(file_name: str, start: int, length: int) -> bytes:
        if file_name in known:
            return known[file_name][start:start + length]
        data = read_range(join(source, file_name), start, length, timeout=timeout, retries=retries, options=options)
        progress.touched(file_name)
        return data

    try:
        index = builder.build(list(files), read, where=where)
    finally:
        progress.close()
    shards = index.get('shards') if isinstance(index, dict) else None
    if not isinstance(shards, list):
        raise DerivedIndexError(f'The {name} index builder returned no {{"shards": [...]}} index for {where}.')
    data = index_text(shards).encode('utf-8')
    label = f'the {name} index derived from {where}'
    from streaming_core.reading.index_file import shard_readers
    shard_readers(parse_index_text(data, label), label)  # every entry readable by its format
    return data


def build_index(source: str, *, fmt: str | None = None, timeout: float = 60.0, retries: int = 2,
                options: dict[str, Any] | None = None,
                format_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The index derived from the files of the directory ``source`` (no ``index.json``), built now and not kept
    (for tools such as ``streaming inspect``; streams use the node's cached copy).

    Args:
        source: A local directory or a remote URL.
        fmt: The index builder to use (``None``: detect it from the files).
        timeout: Per-request timeout in seconds.
        retries: Retries after the first attempt of each request.
        options: Storage backend options.
        format_options: The index builder's options (``{'columns': [...]}``...; see :func:`configure_builder`).

    Raises:
        DerivedIndexError: nothing to index, several formats, or a builder's invalid result.
        FormatOptionError: an option the builder does not take.
    """
    files = list_source(source, timeout=timeout, retries=retries, options=options)
    name, builder, selected = choose_builder(fmt, files, redact_url(source))
    builder = configure_builder(name, builder, format_options, redact_url(source))
    data = build_with(name, builder, selected, source, timeout=timeout, retries=retries, options=options)
    return json.loads(data)


def derive_index(stream: Any, source: str, sdir: str, *, copies: bool) -> tuple[str, bytes, str]:
    """The derived index of ``stream``'s directory ``source``, built when its listing changed (caller holds the
    stream's index lock).

    Args:
        stream: The stream (``format``, ``download_timeout``, ``download_retry``, ``storage_options``,
            ``local_dir``).
        source: The directory holding the data files (the remote directory, or the local one without a remote).
        sdir: The local directory's state directory.
        copies: Whether ``stream.local_dir`` holds copies of the files (then stale copies are removed).

    Returns:
        ``(path of the derived index, its bytes, its identity)``.

    The stream's ``format_options`` configure the builder (:func:`configure_builder`) and are part of the identity.

    Raises:
        DerivedIndexError: see :func:`choose_builder`, or the builder's result is not a valid index.
        FormatOptionError: an option the builder does not take, or a value it refuses.
    """
    timeout = float(stream.download_timeout or 60.0)
    retries = int(stream.download_retry or 0)
    options = stream.storage_options
    where = redact_url(source)
    format_options = dict(getattr(stream, 'format_options', None) or {})
    try:
        files = settled_listing(source, timeout=timeout, retries=retries, options=options)
    except PermanentStorageError as err:
        raise ListingUnavailableError(f'{where} cannot be listed: {err}') from err
    fmt = getattr(stream, 'format', None)
    old = read_listing(sdir)
    key = detection_key(files) if fmt is None else None
    remembered = _remembered(old, key)
    name, builder, selected = choose_builder(fmt, files, where, remembered)
    detected = {'key': key, 'builder': name} if key is not None else None
    builder = configure_builder(name, builder, format_options, where)
    identity = listing_identity(name, selected, format_options, getattr(builder, 'index_version', None))
    path = os.path.join(sdir, DERIVED_INDEX_NAME)
    kept = kept_index(path, old, identity)
    local_root = None if is_remote(source) else local_path(source)
    if kept is not None:
        if local_root is not None and read_prints(sdir, identity) is None:  # kept from a version without them
            entries = [item.key() for item in selected]
            write_prints(sdir, identity, _file_prints(builder, local_root, selected), entries)
            if read_version_entries(sdir, identity) is None:
                write_version_entries(sdir, identity, entries)
        if old is not None and detected is not None and remembered != name:  # remembered for the next process
            write_record(sdir, {**old, 'detected': detected})
        return path, kept, identity

    logger.info('building the %s index of %s (%d files)', name, where, len(selected))
    # Before the files are read: a rewrite meanwhile then stops the job, never passes.
    prints = _file_prints(builder, local_root, selected) if local_root is not None else None
    data = build_with(name, builder, selected, source, timeout=timeout, retries=retries, options=options)
    if copies:
        purged = False
        for stale in stale_copies(old, selected, stream.local_dir, source):
            try:
                os.remove(stale)
                purged = True
            except FileNotFoundError:
                pass
            except OSError as err:
                raise StreamingError(f'Cannot remove {stale}, a local copy of a file that changed in {where} '
                                     f'({type(err).__name__}: {err}); it must not be served. Remove it by hand or '
                                     f'use another `local`.') from err
        if purged or changed_data(old, selected):  # a file changed: a job on the old index must not download it either
            from streaming_core.reading.version_guard import note_purge
            note_purge(sdir)  # a job still reading the old files must not read what replaces them
    write_listing(sdir, path, data, identity=identity, builder=name, source=where, files=selected, prints=prints,
                  extra={'detected': detected} if detected is not None else None)
    return path, data, identity


def _file_prints(builder: Any, root: str, files: Sequence[SourceFile]) -> dict[str, Any]:
    """The prints of the listed local files (:mod:`streaming_core.reading.tail_prints`), over the byte range the
    builder's optional ``print_span(path, size)`` names for each."""
    span = getattr(builder, 'print_span', None)
    return take_prints(root, [item.key() for item in files], span, local_entry, same_data_entry)


def write_listing(sdir: str, path: str, data: bytes, *, identity: str, builder: str, source: str,
                  files: Sequence[SourceFile], extra: dict[str, Any] | None = None,
                  prints: dict[str, Any] | None = None) -> None:
    """Install the derived index ``data`` at ``path``, then the listing it was built from (what
    :func:`kept_index` checks) with ``extra`` fields (what a later process may reuse, such as the detected format
    under its :func:`detection_key`); each written atomically. The record names the installed file by its
    :func:`~streaming_core.reading.cache_record.file_identity` (``derived_stat``), so that a reader trusting the
    record without the digest can tell the file is still the one it describes."""
    write_file_atomic(path, data)
    entries = [item.key() for item in files]
    if prints is not None:  # with the entries, and pruned with them
        write_prints(sdir, identity, prints, entries)
    write_version_entries(sdir, identity, entries)
    listing: dict[str, Any] = {'identity': identity, 'builder': builder, 'source': source,
                               'index_sha256': hashlib.sha256(data).hexdigest(),
                               'files': [item.key() for item in files], 'derived_stat': _stat_list(path),
                               **(extra or {})}
    write_record(sdir, listing)


def _stat_list(path: str) -> list[int] | None:
    stat = file_identity(path)
    return list(stat) if stat is not None else None


def write_record(sdir: str, listing: dict[str, Any]) -> None:
    """Write the listing record ``listing`` (see :func:`write_listing`) atomically."""
    write_file_atomic(os.path.join(sdir, DERIVED_LISTING_NAME), json.dumps(listing).encode('utf-8'))
