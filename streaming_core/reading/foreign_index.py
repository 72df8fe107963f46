"""Foreign ``index.json`` files, read through the index builder that claims them.

An ``index.json`` that is not ours (a JSON object with no ``shards`` key, such as litdata's
``{"chunks": [...], "config": {...}}``) is handed to the index builder that claims it: a builder with a
``claims_index(obj) -> bool`` method, called with the parsed object (``format=`` names one, or exactly one must
claim it). The builder's ``build`` receives that one file (``index.json``, its bytes already read) and may read the
directory's other files by name. The derived index follows the rules of
:mod:`streaming_core.reading.derived_index`, its identity being the digest
of the builder and the index file's content (``derived:<builder>:<sha256>``): it is rebuilt when the foreign index
changes, and local copies the new version does not vouch for (same size and hash in both) are removed first. No
builder claiming it is an :class:`ForeignIndexError` naming the file and, for a format we know
(:data:`KNOWN_FOREIGN_INDEXES`), the distribution to install.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from streaming_core.errors import IndexFormatError, StreamingError, UnknownNameError
from streaming_core.reading.cache_record import FileIdentity, file_identity
from streaming_core.reading.derived_index import (
    DERIVED_INDEX_NAME,
    ForeignIndexError,
    SourceFile,
    build_with,
    configure_builder,
    kept_index,
    listing_identity,
    read_listing,
    write_listing,
    write_record,
)
from streaming_core.reading.index_file import INDEX_BASENAME, parse_index_text
from streaming_core.storage.facade import join
from streaming_core.storage.redact import redact_url

__all__ = ['KNOWN_FOREIGN_INDEXES', 'foreign_index', 'claiming_builder', 'build_foreign_index', 'derive_foreign_index',
           'kept_foreign']

logger = logging.getLogger('streaming_core.reading.foreign_index')


def _is_litdata(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get('chunks'), list) and isinstance(obj.get('config'), dict)


#: Foreign ``index.json`` layouts the core recognises without their plugin (for the install hint when no builder
#: claims one): format name -> test of the parsed object. The distribution comes from ``INSTALL_HINTS``.
KNOWN_FOREIGN_INDEXES: dict[str, Callable[[dict[str, Any]], bool]] = {
    'litdata': _is_litdata,
}


def foreign_index(data: bytes) -> dict[str, Any] | None:
    """The parsed ``index.json`` when it is not a streaming index: a JSON object with no ``shards`` key (``None``
    for ours, and for text that is not a JSON object, which the index reader reports as corrupted).

    An index holding the text ``"shards"`` is taken for ours without parsing it here (ours can be gigabytes).
    """
    if b'"shards"' in data:
        return None
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) and 'shards' not in obj else None


def _claims(builder: Any, obj: dict[str, Any]) -> bool:
    claims = getattr(builder, 'claims_index', None)
    return callable(claims) and bool(claims(obj))


def _not_ours(obj: dict[str, Any], shown: str) -> ForeignIndexError:
    """The error for a foreign index no builder claims: what it looks like and what to install."""
    from streaming_core.machinery.name_registry import INSTALL_HINTS
    keys = ', '.join(repr(key) for key in sorted(obj)[:6]) or 'none'
    message = (f'{shown} is not a streaming index: it has no "shards" list (its top-level keys: {keys}), and no '
               f'installed index builder reads it.')
    for name, test in KNOWN_FOREIGN_INDEXES.items():
        try:
            known = test(obj)
        except Exception:  # a signature test never hides the real error
            known = False
        if known:
            dist = INSTALL_HINTS['index_builder'].get(name) or INSTALL_HINTS['format'].get(name) or name
            return ForeignIndexError(f'{message} It is a {name} index: install the distribution {dist!r}, which '
                                     f'reads it directly (pip install {dist}), and construct again.')
    return ForeignIndexError(f'{message} Point `remote`/`local` at a directory written by streaming-core (or '
                             f'mosaicml-streaming), or install the plugin that reads this format.')


def claiming_builder(fmt: str | None, obj: dict[str, Any], shown: str) -> tuple[str, Any]:
    """The index builder that reads the foreign index ``obj`` (the file ``shown``).

    Args:
        fmt: The ``format=`` the user gave (``None``: the one builder whose ``claims_index(obj)`` is true).
        obj: The parsed ``index.json`` (a JSON object with no ``shards``).
        shown: The file, for messages.

    Returns:
        ``(builder name, builder)``.

    Raises:
        UnknownNameError: ``fmt`` names no index builder.
        ForeignIndexError: no builder claims it (naming the distribution to install for a known format), the one
            ``fmt`` names does not, or several do and no ``format=`` chooses.
    """
    from streaming_core.machinery.lookup import get_registry
    registry = get_registry('index_builder')
    if fmt is not None:
        try:
            builder = registry.get(fmt)
        except UnknownNameError as err:
            raise UnknownNameError(f'format={fmt!r} for {shown}: {err}') from None
        if not _claims(builder, obj):
            raise ForeignIndexError(f'{shown} is not a streaming index (no "shards" list) and the {fmt!r} index '
                                    f'builder (format={fmt!r}) does not read it. Pass the format it was written in, '
                                    f'or no format= to detect it.')
        return fmt, builder
    claimers = [(entry.name, entry.obj) for entry in registry.entries() if _claims(entry.obj, obj)]
    if len(claimers) == 1:
        return claimers[0]
    if claimers:
        raise ForeignIndexError(f'{shown} is not a streaming index and several index builders read it: '
                                f'{[name for name, _ in claimers]}. Pass format= one of them to choose.')
    raise _not_ours(obj, shown)


def build_foreign_index(source: str, data: bytes, obj: dict[str, Any], *, fmt: str | None = None,
                        timeout: float = 60.0, retries: int = 2, options: dict[str, Any] | None = None,
                        format_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The index derived from the foreign ``index.json`` of the directory ``source`` (its bytes ``data``, parsed
    ``obj``), built now and not kept (for tools such as ``streaming inspect``; streams use the node's cached copy).

    Raises:
        ForeignIndexError: no builder claims it (see :func:`claiming_builder`).
        IndexFormatError: the builder refuses it, or its result is invalid.
    """
    shown = redact_url(join(source, INDEX_BASENAME))
    name, builder = claiming_builder(fmt, obj, shown)
    builder = configure_builder(name, builder, format_options, shown)
    item = SourceFile(INDEX_BASENAME, len(data), f'sha256:{hashlib.sha256(data).hexdigest()}')
    built = build_with(name, builder, [item], source, timeout=timeout, retries=retries, options=options,
                   preread={INDEX_BASENAME: data})
    return json.loads(built)


def _parse_file(path: str) -> dict[str, Any] | None:
    try:
        with open(path, 'rb') as handle:
            return parse_index_text(handle.read(), path)
    except (OSError, IndexFormatError):
        return None


def _foreign_key(stream: Any) -> str | None:
    """What deriving a foreign ``index.json`` depends on besides its bytes: the installed index builders
    (:meth:`~streaming_core.machinery.name_registry.Registry.fingerprint`), ``format=`` and the format options. None
    when the builders cannot be told apart from another process's."""
    from streaming_core.machinery.lookup import get_registry
    fingerprint = get_registry('index_builder').fingerprint()
    if fingerprint is None:
        return None
    options = dict(getattr(stream, 'format_options', None) or {})  # encoded as the identity encodes them
    text = json.dumps([fingerprint, getattr(stream, 'format', None), options], sort_keys=True, default=repr)
    return hashlib.blake2s(text.encode('utf-8', 'surrogateescape'), digest_size=16).hexdigest()


def kept_foreign(stream: Any, sdir: str,
                 stat: FileIdentity) -> tuple[str, str, FileIdentity] | None:
    """``(path of the derived index, its identity, its stat)`` when the record in ``sdir`` says it was derived from
    the ``index.json`` whose :func:`~streaming_core.reading.cache_record.file_identity` is ``stat``, with the
    builders, ``format=`` and options the stream has now, and the derived index is still the file the record
    describes: a warm start then neither reads nor parses the foreign index, nor imports every index builder to ask
    which claims it. None otherwise (derive it
    as usual, under the lock, checking the derived index's digest)."""
    record = read_listing(sdir)
    seen = record.get('foreign') if record is not None else None
    if not isinstance(seen, dict) or seen.get('stat') != list(stat) or not isinstance(record.get('identity'), str):
        return None
    key = _foreign_key(stream)
    if key is None or seen.get('key') != key:
        return None
    path = os.path.join(sdir, DERIVED_INDEX_NAME)
    derived = file_identity(path)
    if derived is None or record.get('derived_stat') != list(derived):
        return None  # replaced since (another version, or a crash between the two writes): not this record's file
    return path, record['identity'], derived


def derive_foreign_index(stream: Any, source: str, sdir: str, data: bytes, obj: dict[str, Any], *, copies: bool,
                         previous: Sequence[dict[str, Any]] = (),
                         stat: FileIdentity | None = None, rewritten: bool = False) -> tuple[str, bytes, str]:
    """The index derived from the foreign ``index.json`` of ``stream``'s directory ``source`` (its bytes ``data``,
    parsed ``obj``), built when its content changed (caller holds the stream's index lock).

    Args:
        stream: The stream (``format``, ``download_timeout``, ``download_retry``, ``storage_options``,
            ``local_dir``).
        source: The directory holding the dataset (the remote directory, or the local one without a remote).
        sdir: The local directory's state directory.
        data: The bytes of its ``index.json``.
        obj: ``data`` parsed (:func:`foreign_index`'s result).
        copies: Whether ``stream.local_dir`` holds copies of the files: then, when the index changed, every local
            copy the new version does not vouch for (same size and hash in both versions) is removed first.
        previous: Other index versions the local copies may come from (a streaming index cached there before).
        stat: :func:`~streaming_core.reading.cache_record.file_identity` of the local ``index.json`` whose bytes
            ``data`` are (a directory read without a remote): recorded, so that :func:`kept_foreign` spares the
            next process the derivation.
        rewritten: The remote was rewritten (its ``index.json``'s stat moved) with these same bytes, or the local
            copies are of unknown provenance: rebuilt, and every local copy not vouched for by a hash is removed
            (a foreign index records no hashes: fixed-size data rewritten gives the same bytes).

    Returns:
        ``(path of the derived index, its bytes, its identity)``.

    Raises:
        ForeignIndexError: no builder claims it (see :func:`claiming_builder`).
        IndexFormatError: the builder refuses it (a feature it does not read, named), or its result is invalid.
    """
    from streaming_core.reading.index_versions import compare_versions
    where = redact_url(source)
    shown = redact_url(join(source, INDEX_BASENAME))
    name, builder = claiming_builder(getattr(stream, 'format', None), obj, shown)
    format_options = dict(getattr(stream, 'format_options', None) or {})
    builder = configure_builder(name, builder, format_options, shown)
    item = SourceFile(INDEX_BASENAME, len(data), f'sha256:{hashlib.sha256(data).hexdigest()}')
    identity = listing_identity(name, [item], format_options, getattr(builder, 'index_version', None))
    path = os.path.join(sdir, DERIVED_INDEX_NAME)
    old = read_listing(sdir)
    key = _foreign_key(stream) if stat is not None else None
    foreign = {'stat': list(stat), 'key': key} if stat is not None and key is not None else None
    kept = None if rewritten else kept_index(path, old, identity)
    if kept is not None:
        derived = file_identity(path)  # the file whose digest kept_index just checked
        if old is not None and foreign is not None and derived is not None and \
                (old.get('foreign'), old.get('derived_stat')) != (foreign, list(derived)):
            write_record(sdir, {**old, 'foreign': foreign, 'derived_stat': list(derived)})
        return path, kept, identity
    logger.info('building the %s index of %s from its %s', name, where, INDEX_BASENAME)
    built = build_with(name, builder, [item], source, timeout=float(stream.download_timeout or 60.0),
                   retries=int(stream.download_retry or 0), options=stream.storage_options,
                   preread={INDEX_BASENAME: data})
    if copies:
        new = parse_index_text(built, f'the {name} index derived from {shown}')
        olds = [] if rewritten else [index for index in (_parse_file(path), *previous) if index is not None]
        stale: set[str] = set()
        changed = False
        for index in olds or [None]:
            files, differs = compare_versions(index, new, stream.local_dir)
            stale.update(files)
            changed = changed or differs
        removed = False
        for copy in sorted(stale):
            try:
                os.remove(copy)
                removed = True
            except FileNotFoundError:
                pass
            except OSError as err:
                raise StreamingError(f'Cannot remove {copy}, a local copy of a file {shown} no longer vouches for '
                                     f'({type(err).__name__}: {err}); it must not be served. Remove it by hand or '
                                     f'use another `local`.') from err
        if removed or rewritten or changed:
            from streaming_core.reading.version_guard import note_purge
            note_purge(sdir)  # a job still reading the old files must not read (nor install) what replaces them
    if rewritten:  # the same identity (the same index.json bytes), other sizes maybe: its binary index is stale
        from streaming_core.reading.binary_index import binary_path
        try:
            os.remove(binary_path(sdir, identity))
        except FileNotFoundError:
            pass
    write_listing(sdir, path, built, identity=identity, builder=name, source=where, files=[item],
                  extra={'foreign': foreign} if foreign is not None else None)
    return path, built, identity
