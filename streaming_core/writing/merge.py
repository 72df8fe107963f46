"""``merge_index``: combine the ``index.json`` of datasets written in parallel (partitions) into one index.

Two call forms, as in the reference (spec 7.4):

* ``merge_index(index_file_urls, out, keep_local=True, download_timeout=60)``: the partition indexes are listed
  (local paths, remote URLs, or ``(local, remote)`` pairs) and merged in the given order;
* ``merge_index(out, keep_local=True, download_timeout=60)``: the partitions are the direct subdirectories of
  ``out`` holding an ``index.json`` (locally, or under the remote part of ``out``), merged in the lexicographic order
  of their paths (``10/`` before ``2/``).

Each shard file name is prefixed with its partition's directory name (``0/shard.00000.mds``); the result is
``{"version": 2, "shards": [...]}`` written to the local part of ``out`` and uploaded to its remote part through the
storage registry (any storage plugin). Remote sources are fetched the same way.

Differences from the reference, on purpose: running it twice overwrites the merged index instead of failing;
``keep_local=False`` never deletes a local file that has no remote copy (with no remote, nothing is deleted; with
one, only files the remote listing shows are removed, plus the local merged index); a file name that would escape
the dataset directory is refused.

Partition indexes are streamed (one shard entry decoded at a time) and the merged index is written as it goes, so
partitions totalling millions of shards merge in bounded memory; the text is exactly the reference's
``json.dumps({"version": 2, "shards": [...]})``.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streaming_core.errors import IndexFormatError, RemoteNotFoundError, StorageError, UploadError
from streaming_core.reading.cache_record import is_in_place, record_written_in_place
from streaming_core.reading.index_file import INDEX_BASENAME, check_basename
from streaming_core.storage.facade import (
    check_output,
    download_file,
    is_remote,
    join,
    list_objects,
    list_with_stats,
    local_path,
    upload_file,
    url_scheme,
)
from streaming_core.storage.redact import redact_repr, redact_url

__all__ = ['merge_index', 'merge_index_from_list', 'merge_index_from_root', 'merged_index_text']

logger = logging.getLogger('streaming_core.writing.merge')

_FILE_KEYS = ('raw_data', 'zip_data', 'raw_meta', 'zip_meta')
Source = str | tuple[str, str]


def merge_index(*args: Any, **kwargs: Any) -> str:
    """Merge partition indexes into one (see the module docstring for the two call forms).

    Returns:
        Where the merged ``index.json`` was committed: the remote URL when ``out`` has a remote, else the local
        path.

    Raises:
        ValueError: ``'Invalid arguments to merge_index: ...'`` for any other combination of arguments.
        FileNotFoundError: a listed partition index exists neither locally nor remotely, or the root holds none.
        IndexFormatError: a partition index is corrupt, of another version, or names an unsafe file.
    """
    first = args[0] if args else None
    if isinstance(first, list) or (not args and 'index_file_urls' in kwargs):
        target = merge_index_from_list
    elif isinstance(first, (str, tuple)) or (not args and 'out' in kwargs):
        target = merge_index_from_root
    else:
        raise ValueError(f'Invalid arguments to merge_index: {redact_repr(args)}, {redact_repr(kwargs)}. Call '
                         f'merge_index(index_file_urls, out) or merge_index(out).')
    try:
        inspect.signature(target).bind(*args, **kwargs)
    except TypeError as err:
        raise ValueError(f'Invalid arguments to merge_index: {redact_repr(args)}, {redact_repr(kwargs)} '
                         f'({err}).') from None
    return target(*args, **kwargs)


def merge_index_from_list(index_file_urls: Sequence[Source], out: str | tuple[str, str], keep_local: bool = True,
                          download_timeout: float = 60, *, storage_options: Mapping[str, Any] | None = None,
                          retries: int = 2) -> str:
    """Merge the listed partition indexes, in the given order (duplicates and trailing ``/`` removed)."""
    if not isinstance(index_file_urls, (list, tuple)) or not index_file_urls:
        raise ValueError(f'Invalid arguments to merge_index: index_file_urls must be a non-empty list, got '
                         f'{redact_repr(index_file_urls)}.')
    sources = _dedupe(index_file_urls)
    local, remote = _split_out(out)
    temp = local is None
    if local is None:
        local = tempfile.mkdtemp(prefix='streaming-merge-out-')
    try:
        os.makedirs(local, exist_ok=True)
        index_path = os.path.join(local, INDEX_BASENAME)
        _refuse_a_dataset_s_own_index(index_path, index_path)
        if remote is not None:
            with tempfile.TemporaryDirectory(prefix='streaming-merge-check-') as scratch:
                copy = os.path.join(scratch, INDEX_BASENAME)
                try:
                    download_file(join(remote, INDEX_BASENAME), copy, timeout=download_timeout, retries=retries,
                                  options=storage_options)
                except RemoteNotFoundError:
                    pass
                else:
                    _refuse_a_dataset_s_own_index(copy, redact_url(join(remote, INDEX_BASENAME)))
        with tempfile.TemporaryDirectory(prefix='streaming-merge-') as scratch:
            _write_merged(sources, index_path, scratch, download_timeout, storage_options, retries,
                          out_dir=local if remote is None else None)
        if remote is None:
            record_written_in_place(local)  # a dataset of its own, as a writer's output (hashed in chunks)
            return index_path
        url = join(remote, INDEX_BASENAME)
        remote_sizes = _check_remote_files(index_path, remote, storage_options, download_timeout)
        upload_file(index_path, url, timeout=download_timeout, retries=retries, options=storage_options)
        if remote_sizes is not None:
            remote_sizes[INDEX_BASENAME] = os.path.getsize(index_path)  # what was just uploaded
    finally:
        if temp:
            shutil.rmtree(local, ignore_errors=True)
    if not keep_local and not temp:
        _remove_uploaded(local, remote, remote_sizes)
    return url


def _write_merged(sources: Sequence[Source], index_path: str, scratch: str, timeout: float,
                  options: Mapping[str, Any] | None, retries: int, out_dir: str | None = None) -> None:
    """Write the merged index to ``index_path`` atomically, streaming each partition index one entry at a time
    (:func:`streaming_core.reading.index_file_stream.iter_index_entries`): partitions of millions of shards merge
    without one Python object per shard. The text is exactly :func:`merged_index_text`'s. Each partition is checked
    whole before any of its entries is written (a bad partition leaves the previous merged index in place). With
    ``out_dir`` (a merged dataset with no remote), a local partition must sit directly under it, where the merged
    index names its files."""
    from streaming_core.storage.facade import temp_name
    tmp = temp_name(index_path)
    try:
        with open(tmp, 'w', encoding='utf-8') as handle:
            handle.write('{"version": 2, "shards": [')
            first = True
            prefixes: dict[str, str] = {}
            for i, source in enumerate(sources):
                path, shown, prefix = _fetch(source, os.path.join(scratch, str(i)), timeout, options, retries)
                if prefix in prefixes:
                    raise ValueError(f'merge_index: the partitions {prefixes[prefix]} and {shown} are both in a '
                                     f'directory named {prefix!r}; each partition\'s files are named in the merged '
                                     f'index by that name (`{prefix}/shard...`), so one would be read twice and the '
                                     f'other not at all. Give partitions distinct directory names, directly under '
                                     f'the merged dataset\'s directory.')
                prefixes[prefix] = shown
                if out_dir is not None and not path.startswith(scratch) and \
                        os.path.dirname(os.path.dirname(os.path.realpath(path))) != os.path.realpath(out_dir):
                    raise ValueError(f'merge_index: the partition {shown} is not a direct subdirectory of {out_dir}, '
                                     f'where the merged index names its files ({prefix}/shard...); the merged '
                                     f'dataset could not read them. Write the partitions to {out_dir}/<name>/, or '
                                     f'merge into their parent directory.')
                for _ in _entries(path, shown):  # the whole partition is valid before any of it is written
                    pass
                for n, entry in enumerate(_entries(path, shown)):
                    if not first:
                        handle.write(', ')
                    handle.write(json.dumps(_prefixed(entry, prefix, shown, n)))
                    first = False
            handle.write(']}')
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, index_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _entries(path: str, shown: str) -> Iterator[dict[str, Any]]:
    """The shard entries of one partition index, decoded one at a time (errors as
    :func:`~streaming_core.reading.index_file.parse_index_text` raises them, naming ``shown``)."""
    from streaming_core.reading.index_file_stream import iter_index_entries
    with open(path, 'rb') as handle:
        for entry in iter_index_entries(handle, shown):
            if not isinstance(entry, dict):
                raise IndexFormatError(f'Index file at {shown}: "shards" must be a list of objects.')
            yield entry


def merge_index_from_root(out: str | tuple[str, str], keep_local: bool = True, download_timeout: float = 60, *,
                          storage_options: Mapping[str, Any] | None = None, retries: int = 2) -> str:
    """Merge every ``<out>/<partition>/index.json``, in lexicographic path order.

    Refused, so that no partition's samples are left out silently: a direct subdirectory without an ``index.json``
    that holds shard files or a partition index anywhere below it (a writer that failed or still runs, or a
    partition one level too deep), and, with a remote, a partition whose ``index.json`` is only local.
    """
    local, remote = _split_out(out)
    local_found = []
    with_shards: set[str] = set()  # partition directories holding shard files, or an index below them
    if local and os.path.isdir(local):
        local_found = sorted(os.path.join(local, entry.name, INDEX_BASENAME) for entry in os.scandir(local)
                             if entry.is_dir() and os.path.isfile(os.path.join(entry.path, INDEX_BASENAME)))
        if not remote:
            with_shards = {entry.name for entry in os.scandir(local) if entry.is_dir()
                           and not os.path.isfile(os.path.join(entry.path, INDEX_BASENAME))
                           and _holds_partition_files(entry.path)}
    remote_found: list[str] = []
    if remote:
        root = remote.rstrip('/') + '/'
        for url in list_objects(root, timeout=download_timeout, options=storage_options):
            rest = url[len(root):] if url.startswith(root) else ''
            parts = rest.split('/')
            if len(parts) == 2 and parts[1] == INDEX_BASENAME and parts[0]:
                remote_found.append(url)
            elif len(parts) >= 2 and parts[0] and (parts[-1].startswith('shard.') or parts[-1] == INDEX_BASENAME):
                with_shards.add(parts[0])
        remote_found.sort()
    indexed = {os.path.basename(_parent(p)) for p in (remote_found or local_found)}
    unfinished = sorted(with_shards - indexed)
    if unfinished:
        where = redact_url(remote) if remote else local
        raise IndexFormatError(f'merge_index: the partition(s) {unfinished} of {where} hold shard files (or a '
                               f'partition index.json in a subdirectory) but no index.json of their own: their '
                               f'writers failed or are still running, or the partitions sit one level too deep '
                               f'(merge_index(out) merges the direct subdirectories of out), and merging without '
                               f'them would lose their samples. Write them again, move them up a level, or remove '
                               f'those directories, then merge.')
    if remote_found:
        uploaded = {os.path.basename(_parent(u)) for u in remote_found}
        local_only = sorted({os.path.basename(_parent(p)) for p in local_found} - uploaded)
        if local_only:
            raise IndexFormatError(f'merge_index: the partition(s) {local_only} of {local} have an index.json '
                                   f'locally but not on {redact_url(remote)} (written only locally, or their upload '
                                   f'failed): merging without them would lose their samples. Upload them (write '
                                   f'them again with out=(local, remote)), or remove them locally, then merge.')
    sources: list[Source]
    if remote_found and [_parent(p) for p in local_found] == [_parent(u) for u in remote_found]:
        sources = list(zip(local_found, remote_found, strict=True))
    elif remote_found:
        sources = list(remote_found)
    else:
        sources = list(local_found)
    if not sources:
        where = f'{local} or {redact_url(remote)}' if remote else local
        raise FileNotFoundError(f'merge_index found no partition index.json in the direct subdirectories of '
                                f'{where}.')
    return merge_index_from_list(sources, out, keep_local, download_timeout, storage_options=storage_options,
                                 retries=retries)


def _holds_partition_files(directory: str) -> bool:
    """True when ``directory`` or any directory below it holds a shard file (``shard.*``) or an ``index.json``."""
    for _, _, names in os.walk(directory):
        if any(name.startswith('shard.') or name == INDEX_BASENAME for name in names):
            return True
    return False


def merged_index_text(shards: Sequence[Mapping[str, Any]]) -> str:
    """The merged index text: ``{"version": 2, "shards": [...]}`` (plain ``json.dumps``, as the reference)."""
    return json.dumps({'version': 2, 'shards': list(shards)})


# ----------------------------------------------------------------------------------------------------------------
def _split_out(out: str | tuple[str, str]) -> tuple[str | None, str | None]:
    check_output(out)
    if isinstance(out, str) and out:
        return (None, out.rstrip('/')) if is_remote(out) else (local_path(out), None)
    if isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(x, str) and x for x in out):
        if is_remote(out[0]):
            raise ValueError(f'Invalid `out` argument: the first element of {redact_repr(out)} must be a local '
                             f'directory.')
        local, remote = local_path(out[0]), out[1].rstrip('/')
        if is_in_place(remote, local):
            return local, None  # the "remote" is the local directory itself
        return local, remote
    raise ValueError(f'Invalid `out` argument: {redact_repr(out)}. Give a directory, a URL or a (local, remote) '
                     f'tuple.')


def _dedupe(items: Sequence[Source]) -> list[Source]:
    seen: set[Any] = set()
    result: list[Source] = []
    for item in items:
        if isinstance(item, str) and item:
            key: Any = item.rstrip('/')
        elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(x, str) for x in item):
            key = (item[0].rstrip('/'), item[1].rstrip('/'))
        else:
            raise ValueError(f'Invalid arguments to merge_index: {redact_repr(item)} is neither an index path/URL '
                             f'nor a (local, remote) pair.')
        if key not in seen:
            seen.add(key)
            result.append(key)
    return result


def _parent(path: str) -> str:
    """The name of the directory holding an index (``out/7/index.json`` -> ``7``)."""
    return path.rstrip('/').rsplit('/', 2)[-2] if '/' in path.rstrip('/') else ''


def _absolute(path: str) -> str:
    """``path`` made absolute and normal, with ``/`` separators (``index.json`` run from inside a partition, or
    ``0/./index.json``, names its real directory)."""
    return os.path.normpath(os.path.abspath(path)).replace(os.sep, '/')


def _fetch(source: Source, scratch: str, timeout: float, options: Mapping[str, Any] | None,
           retries: int) -> tuple[str, str, str]:
    """A local copy of one partition index: ``(local path, name for messages, partition prefix)``."""
    if isinstance(source, tuple):
        local, remote = source
        if local and os.path.isfile(local_path(local)):
            return local_path(local), local, _parent(_absolute(local_path(local)))
        if not remote:
            raise FileNotFoundError(f'Check data availability! local index {local} is not accessible. remote index '
                                    f'{redact_url(remote)} does not exist')
        url = remote
    else:
        if not is_remote(source):
            path = local_path(source)
            if not os.path.isfile(path):
                raise FileNotFoundError(f'Check data availability! local index {source} is not accessible.')
            return path, source, _parent(_absolute(path))
        url = source
    target = os.path.join(scratch, INDEX_BASENAME)
    shown = redact_url(url)
    try:
        download_file(url, target, timeout=timeout, retries=retries, options=options)
    except RemoteNotFoundError as err:
        raise RemoteNotFoundError(f'Failed to download index.json: {shown} does not exist. ({err})') from err
    except StorageError as err:
        raise StorageError(f'Failed to download index.json: {shown}: {err}') from err
    return target, shown, _parent(url)


def _prefixed(entry: Mapping[str, Any], prefix: str, shown: str, number: int) -> dict[str, Any]:
    where = f'{shown} shard {number}'
    check_basename(prefix, f'{shown} (partition directory name)')
    if not isinstance(entry, Mapping):
        raise ValueError(f'{where}: a shard entry must be an object.')
    result = dict(entry)
    for key in _FILE_KEYS:
        info = entry.get(key)
        if isinstance(info, Mapping):
            basename = check_basename(info.get('basename'), f'{where} {key}')
            result[key] = {**info, 'basename': f'{prefix}/{basename}'}
    return result


def _refuse_a_dataset_s_own_index(index_path: str, shown: str) -> None:
    """A merged index names every file under its partition's directory (``<partition>/shard...``). An
    ``index.json`` at the output that names a file directly beside it is a dataset's own index, not an earlier
    merge: replacing it would leave that dataset's samples unindexed (the reference refuses any existing one).

    Raises:
        FileExistsError: naming the index and a file it names.
    """
    if not os.path.isfile(index_path):
        return
    try:
        beside = next((info['basename'] for entry in _entries(index_path, index_path) if isinstance(entry, Mapping)
                       for info in map(entry.get, _FILE_KEYS) if isinstance(info, Mapping)
                       and isinstance(info.get('basename'), str) and '/' not in info['basename']), None)
    except (ValueError, OSError):
        return  # unreadable: not a dataset anyone reads; the merge replaces it
    if beside is not None:
        raise FileExistsError(f'merge_index: {shown} is the index of a dataset stored there ({beside} is beside it), '
                              f'not an earlier merge; merging would replace it and leave its samples unindexed. Merge '
                              f'into another directory, or move that dataset into a subdirectory first.')


def _remote_sizes(remote: str, options: Mapping[str, Any] | None, timeout: float) -> dict[str, int | None]:
    """``{path relative to remote: size}`` of every object under ``remote`` (one listing)."""
    listed = list_with_stats(remote.rstrip('/') + '/', timeout=timeout, options=options)
    root = remote.rstrip('/') + '/'
    if url_scheme(remote) == '':
        root = os.path.join(remote, '')
    return {item.url[len(root):].replace(os.sep, '/'): item.stat.size for item in listed if item.url.startswith(root)}


def _check_remote_files(index_path: str, remote: str, options: Mapping[str, Any] | None,
                        timeout: float) -> dict[str, int | None] | None:
    """Before the merged index is uploaded: every file a reader would download from ``remote`` is there, with the
    size the index declares (partitions written only locally, or an upload that failed, would make a committed
    index name missing files). A store that cannot be listed is not checked (logged).

    Returns:
        The listing (:func:`_remote_sizes`), or ``None`` for a store that cannot be listed.

    Raises:
        UploadError: naming the missing or different files; the merged index is not uploaded.
    """
    try:
        sizes = _remote_sizes(remote, options, timeout)
    except Exception as err:  # noqa: BLE001 (a backend without listing)
        logger.warning('merge_index: cannot list %s (%s); the files the merged index names were not checked there.',
                       redact_url(remote), err)
        return None
    bad = []
    for entry in _entries(index_path, index_path):
        for kind in ('data', 'meta'):  # the file a reader downloads: the compressed one when there is one
            info = entry.get(f'zip_{kind}') or entry.get(f'raw_{kind}')
            if not isinstance(info, Mapping) or not info.get('basename'):
                continue
            name, size = info['basename'], sizes.get(info['basename'])
            if name not in sizes or (size is not None and info.get('bytes') is not None
                                     and int(size) != int(info['bytes'])):
                bad.append(name)
    if bad:
        raise UploadError(f'merge_index: {redact_url(remote)} lacks {len(bad)} file(s) the merged index names, or '
                          f'holds them with other sizes (for example {bad[0]}): the partitions were not uploaded '
                          f'there (written only locally?) or an upload failed. The merged index was not uploaded; '
                          f'write the partitions to the remote, then merge again.')
    return sizes


def _remove_uploaded(local: str, remote: str, remote_sizes: Mapping[str, int | None] | None) -> None:
    """Delete local files that the remote listing (taken before the index was uploaded, with the index added) shows
    with the same size (the reference removes the whole local directory; we never delete a file without a remote
    copy, nor one whose remote namesake has another size: an older version left there, which would leave the merged
    index naming files of two versions), then the directories left empty. Without a listing, nothing is deleted.
    """
    if remote_sizes is None:  # a backend without listing: keep everything
        logger.warning('merge_index(keep_local=False): cannot list %s; keeping the local files.', redact_url(remote))
        return
    kept = []
    for dirpath, _, files in os.walk(local):
        for name in files:
            path = os.path.join(dirpath, name)
            relative = os.path.relpath(path, local).replace(os.sep, '/')
            if relative not in remote_sizes:
                continue
            if remote_sizes[relative] != os.path.getsize(path):
                kept.append(relative)
                continue
            os.remove(path)
    if kept:
        logger.warning('merge_index(keep_local=False): kept %d local file(s) whose remote copy has another size '
                       '(an older version?), for example %s; upload them before reading the merged dataset from %s.',
                       len(kept), kept[0], redact_url(remote))
    for dirpath, _, _ in sorted(os.walk(local), key=lambda item: -len(item[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
