"""``streaming verify DATASET``: check every shard against the index and decode every sample.

For each shard: every file it is stored as must exist with the size the index declares and match each recorded
hash (or only ``--hash NAME``); a compressed file must decompress to the declared raw size and raw hashes; then
the shard is opened by its format plugin (which checks its header and offset table) and every sample is decoded.
A local directory is checked in place (a shard present only in raw form, as in a cache, is checked through its raw
file). Readers that read a compressed local directory in place write decompressed copies next to the compressed
files and read those: such a copy is checked too (its size, the raw hashes the index records, and its bytes against
the decompressed compressed file), and it is the file that is decoded. A remote dataset is downloaded shard by
shard into a temporary directory that never holds more than one shard's files. Every bad shard is reported with
the reason; the exit status is 1 when any shard is bad.

Units that share a file. A format may cut a file into several index entries (*units*: a Parquet file's row groups)
that name it and follow each other (:mod:`streaming_core.reading.catalogue`). Consecutive units naming the same files
share their check: the files are downloaded (remote), read and hashed once, under the first of them, and each unit is
then decoded from them; a bad file makes each of its units bad with the same reason. The report says units and files
where they differ (``Verified 6 row groups in 2 files``).

Our ``index.json`` is streamed (:class:`StreamedShards`): one entry decoded at a time, so the index of a dataset of
millions of shards is never held whole in memory (one small result per shard is kept for the report).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from streaming_core.errors import RemoteNotFoundError, StreamingError
from streaming_core.reading.cache_record import FileIdentity, stat_identity
from streaming_core.reading.index_file import INDEX_BASENAME, resolve_inside
from streaming_core.storage.facade import download_file, join
from streaming_core.tools.commands._common import (
    DatasetIndex,
    add_format_option,
    add_storage_option,
    human_bytes,
    locate_index_file,
    open_located_index,
    storage_options,
)
from streaming_core.tools.commands.inspect import entry_files, units_word

__all__ = ['add_parser', 'run', 'verify_dataset', 'ShardResult', 'StreamedShards', 'open_streamed']


@dataclass
class ShardResult:
    """The outcome for one shard: ``problems`` is empty when it is good."""

    shard: int
    file: str
    samples: int = 0
    checked_bytes: int = 0
    hashes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Decompressed copies found next to compressed files (what readers read), checked too.
    copies: list[str] = field(default_factory=list)
    #: The shard format named by the index entry.
    format: str | None = None
    #: The first shard naming the same files (this shard for a shard of its own files): the files were checked, and
    #: their bytes counted, under that shard.
    file_shard: int = -1

    def __post_init__(self) -> None:
        if self.file_shard < 0:
            self.file_shard = self.shard

    @property
    def ok(self) -> bool:
        """Whether the shard passed every check."""
        return not self.problems


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'verify', help='re-hash every shard against the index and decode every sample',
        description='Verify a dataset: every shard file against the sizes and hashes in index.json (every recorded '
                    'hash, or only --hash), decompression, the shard headers, and the decoding of every sample. '
                    'Remote datasets are downloaded one file at a time into a temporary directory (once for all the '
                    'units that share it). Exits with status 1 when any shard is bad, listing each with the reason. '
                    'A local dataset\'s shard files that the index does not name (outside subdirectories with an '
                    'index.json of their own) are listed in a note.')
    parser.add_argument('dataset', metavar='DATASET', help='a dataset directory, its index.json, or a remote URL')
    parser.add_argument('--split', default=None, help='a split subdirectory of DATASET')
    add_format_option(parser)
    parser.add_argument('--hash', action='append', default=None, metavar='NAME',
                        help='check only this hash (repeatable; default: every hash the index records)')
    parser.add_argument('--no-decode', action='store_true', help='check files only; do not decode the samples')
    parser.add_argument('--allow-unsafe-types', action='store_true',
                        help='also decode pkl columns (unpickling can run code: only for data you trust)')
    parser.add_argument('--json', action='store_true', help='print the per-shard results as JSON')
    parser.add_argument('--quiet', action='store_true', help='no progress bar')
    add_storage_option(parser)
    parser.set_defaults(run=run)


def _hash_names(found: DatasetIndex, wanted: Sequence[str] | None) -> list[str] | None:
    """The hash names to check (None: each file's own recorded hashes), after checking they exist."""
    from streaming_core.storage.hashing import get_hash
    recorded = sorted({name for entry in found.index['shards'] for name in (entry.get('hashes') or [])})
    if not wanted:
        for name in recorded:
            get_hash(name)
        return None
    for name in wanted:
        get_hash(name)
        if name not in recorded:
            raise ValueError(f'The index {found.location} records no {name!r} hashes (it records: '
                             f'{", ".join(recorded) or "none"}); choose one of those or leave out --hash.')
    return list(wanted)


class StreamedShards:
    """The shard entries of an ``index.json``, decoded one at a time at each pass over the file
    (:func:`streaming_core.reading.index_file_stream.iter_index_entries`): an index of millions of shards is verified
    without holding one object per entry. The first pass (``len``) checks the whole file; a later pass over a file
    changed since (size, mtime, inode) is an error, never a mix of versions.

    Args:
        path: The local ``index.json``.
        location: Its path or URL, named in errors.
    """

    def __init__(self, path: str, location: str) -> None:
        self.path = path
        self.location = location
        self._len: int | None = None
        self._stat: FileIdentity | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        from streaming_core.errors import IndexFormatError
        from streaming_core.reading.index_file_stream import iter_index_entries
        with open(self.path, 'rb') as handle:
            info = os.fstat(handle.fileno())
            stat = stat_identity(info)
            if self._stat is None:
                self._stat = stat
            elif stat != self._stat:
                raise StreamingError(f'{self.path} changed while the dataset was being verified: verify again.')
            for entry in iter_index_entries(handle, self.location):
                if not isinstance(entry, dict):
                    raise IndexFormatError(f'Index file at {self.location}: "shards" must be a list of objects.')
                yield entry

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self)
        return self._len


def open_streamed(dataset: str, split: str | None, options: dict[str, Any], scratch: str,
                  fmt: str | None = None) -> DatasetIndex:
    """Like :func:`~streaming_core.tools.commands._common.open_index`, but our ``index.json`` is streamed
    (:class:`StreamedShards`, checked whole here); another library's ``index.json``, a broken one, and a directory
    that indexes itself go through ``open_index`` (its index, or its error). A remote index is downloaded into
    ``scratch``, which must outlive the result."""
    from streaming_core.errors import IndexFormatError
    located = locate_index_file(dataset, split, options, scratch)
    if located is not None:
        path, location, root, remote = located
        shards = StreamedShards(path, location)
        try:
            len(shards)
        except IndexFormatError:
            pass
        else:
            return DatasetIndex({'shards': shards, 'version': 2}, location, root, remote, os.path.getsize(path))
    return open_located_index(located, dataset, split, options, fmt=fmt)


class _Fetcher:
    """Local paths for shard files: in place for a local dataset, downloaded to scratch for a remote one."""

    def __init__(self, found: DatasetIndex, scratch: str, options: dict[str, Any]) -> None:
        self.found = found
        self.scratch = scratch
        self.options = options

    def get(self, basename: str, where: str) -> str | None:
        if not self.found.remote:
            path = resolve_inside(self.found.root, basename, where)
            return path if os.path.isfile(path) else None
        path = os.path.join(self.scratch, *basename.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            download_file(join(self.found.root, basename), path, options=self.options)
        except RemoteNotFoundError:
            return None
        return path

    def clear(self) -> None:
        if self.found.remote:
            for entry in os.listdir(self.scratch):
                path = os.path.join(self.scratch, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def _check_hashes(data: bytes, info: Any, names: list[str] | None, label: str, result: ShardResult) -> None:
    from streaming_core.storage.hashing import get_hash
    for name in (sorted(info.hashes) if names is None else names):
        expected = info.hashes.get(name)
        if expected is None:
            result.problems.append(f'{label}: the index records no {name} hash for this file')
            continue
        actual = get_hash(name)(data)
        if actual != expected:
            result.problems.append(f'{label}: {name} mismatch (index {expected}, file {actual})')
        elif name not in result.hashes:
            result.hashes.append(name)


def _read_checked(path: str, info: Any, names: list[str] | None, label: str, result: ShardResult) -> bytes | None:
    """Read one local file and check its size and hashes against ``info``; None when the size is wrong."""
    with open(path, 'rb') as handle:
        data = handle.read()
    result.checked_bytes += len(data)
    if len(data) != info.bytes:
        result.problems.append(f'{label}: {len(data)} bytes, but the index declares {info.bytes} '
                               f'(truncated or replaced)')
        return None
    _check_hashes(data, info, names, label, result)
    return data


def _check_part(raw: Any, zipped: Any, compression: str | None, fetch: _Fetcher, names: list[str] | None,
                result: ShardResult, where: str, scratch: str) -> str | None:
    """Check one file pair; returns the local path of the verified raw file, or None when it is unusable.

    In a local directory, a decompressed copy next to a compressed file (written there by readers, and what they
    read) is checked too: its size, the raw hashes the index records, and its bytes against the decompressed
    compressed file. It is then the file that is decoded.
    """
    from streaming_core.storage.compression import decompress
    if zipped is None:
        path = fetch.get(raw.basename, where)
        if path is None:
            result.problems.append(f'{raw.basename}: missing')
            return None
        return path if _read_checked(path, raw, names, raw.basename, result) is not None else None
    zip_path = fetch.get(zipped.basename, where)
    copy = None if fetch.found.remote else fetch.get(raw.basename, where)  # a cache may keep only the raw file
    if zip_path is None and copy is None:
        result.problems.append(f'{zipped.basename}: missing')
        return None
    expanded = None
    if zip_path is not None:
        data = _read_checked(zip_path, zipped, names, zipped.basename, result)
        if data is not None:
            try:
                data = decompress(str(compression), data, max_size=raw.bytes)
            except (StreamingError, ValueError, OSError) as err:
                result.problems.append(f'{zipped.basename}: does not decompress with {compression}: {err}')
                data = None
        if data is not None and len(data) != raw.bytes:
            result.problems.append(f'{zipped.basename}: decompresses to {len(data)} bytes, but the index declares '
                                   f'{raw.bytes} for {raw.basename}')
            data = None
        if data is not None:
            _check_hashes(data, raw, names, f'{raw.basename} (decompressed)', result)
            expanded = data
    if copy is None:
        if expanded is None:
            return None
        out = os.path.join(scratch, 'raw', *raw.basename.split('/'))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, 'wb') as handle:
            handle.write(expanded)
        return out
    label = raw.basename
    if zip_path is not None:
        label = f'{raw.basename} (the decompressed copy readers read)'
        result.copies.append(raw.basename)
    before = len(result.problems)
    data = _read_checked(copy, raw, names, label, result)
    if data is not None and expanded is not None and len(result.problems) == before and data != expanded:
        first = next(i for i, (x, y) in enumerate(zip(data, expanded)) if x != y)
        result.problems.append(f'{label}: differs from what {zipped.basename} decompresses to (first at byte '
                               f'{first})')
    if len(result.problems) == before:
        return copy
    if zip_path is not None:
        result.problems[-1] += f'; delete it and readers decompress {zipped.basename} again'
    return None


@dataclass
class _CheckedFiles:
    """The files of the last shard checked, kept for the next shards naming the same files (units of one file)."""

    names: tuple[Any, ...]
    shard: int
    paths: list[str | None]
    problems: list[str]
    hashes: list[str]

    def share(self, result: ShardResult) -> list[str | None]:
        """Give ``result`` the outcome of the files' check; returns their local paths."""
        result.file_shard = self.shard
        result.problems.extend(self.problems)
        result.hashes.extend(name for name in self.hashes if name not in result.hashes)
        return self.paths


def _parts_names(reader: Any) -> tuple[Any, ...]:
    return tuple((raw.basename, zipped.basename if zipped is not None else None) for raw, zipped in reader.parts)


def _decode(reader: Any, paths: list[str], result: ShardResult) -> None:
    try:
        view = reader.open(paths)
    except Exception as err:  # the format plugin's own checks (header, offsets, sample count)
        result.problems.append(f'cannot be opened: {err}')
        return
    try:
        for i in range(len(view)):
            try:
                view[i]
            except Exception as err:  # any decoding failure is a finding, not a crash
                result.problems.append(f'sample {i} does not decode: {type(err).__name__}: {err}')
                return
    finally:
        view.close()


def verify_dataset(found: DatasetIndex, *, hashes: Sequence[str] | None = None, decode: bool = True,
                   allow_unsafe_types: bool = False, options: dict[str, Any] | None = None,
                   on_result: Callable[[ShardResult], None] | None = None,
                   progress: bool = False) -> list[ShardResult]:
    """Verify every shard of an opened index (see the module docstring); returns one result per shard."""
    from streaming_core.machinery.lookup import get_registry
    names = _hash_names(found, hashes)
    results = []
    entries = found.index['shards']
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=len(entries), unit=' shards', desc='Verifying', dynamic_ncols=True)
    with tempfile.TemporaryDirectory(prefix='streaming-verify-') as scratch:
        fetch = _Fetcher(found, os.path.join(scratch, 'files'), dict(options or {}))
        os.makedirs(fetch.scratch)
        raw_dir = os.path.join(scratch, 'raw')
        checked: _CheckedFiles | None = None  # the previous shard's files, kept while the next shards name them
        for number, entry in enumerate(entries):
            where = f'{found.location} shard {number}'
            result = ShardResult(number, str((entry.get('raw_data') or {}).get('basename', '?')),
                                 int(entry.get('samples') or 0) if isinstance(entry.get('samples'), int) else 0,
                                 format=entry.get('format') if isinstance(entry.get('format'), str) else None)
            try:
                reader = get_registry('format').get(str(entry.get('format'))).reader(  # nothing decoded: no risk
                    entry, allow_unsafe_types=allow_unsafe_types or not decode, where=where)
            except Exception as err:  # an invalid entry is reported like any other bad shard
                result.problems.append(f'invalid index entry: {err}')
                reader = None
            if reader is not None:
                names_here = _parts_names(reader)
                if checked is not None and checked.names == names_here:  # another unit of the files just checked
                    paths = checked.share(result)
                else:
                    checked = None
                    fetch.clear()
                    shutil.rmtree(raw_dir, ignore_errors=True)
                    try:
                        paths = [_check_part(raw, zipped, reader.compression, fetch, names, result, where, scratch)
                                 for raw, zipped in reader.parts]
                    except StreamingError as err:
                        result.problems.append(str(err))
                        paths = [None]
                    checked = _CheckedFiles(names_here, number, paths, list(result.problems), list(result.hashes))
                if decode and all(paths) and not result.problems:
                    try:
                        _decode(reader, paths, result)  # type: ignore[arg-type]
                    except StreamingError as err:
                        result.problems.append(str(err))
            results.append(result)
            if on_result is not None:
                on_result(result)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(bad=sum(not r.ok for r in results), bytes=human_bytes(
                    sum(r.checked_bytes for r in results)))
    if bar is not None:
        bar.close()
    return results


def unindexed_files(found: DatasetIndex) -> list[str]:
    """Shard files (``shard.*``) under a local dataset's directory that its index does not name: a reader never
    reads them (left by an earlier write, or copied in). Subdirectories with an ``index.json`` of their own (splits,
    partitions of a hierarchy) are theirs; temporary files (``*.tmp``) are skipped. Empty for a remote dataset."""
    if found.remote or not os.path.isdir(found.root):
        return []
    named = {name for entry in found.index.get('shards', ()) if isinstance(entry, dict)
             for name in entry_files(entry) if isinstance(name, str)}
    extra = []
    for directory, subdirs, names in os.walk(found.root):
        if directory != found.root and os.path.isfile(os.path.join(directory, INDEX_BASENAME)):
            subdirs[:] = []
            continue
        subdirs.sort()
        relative = os.path.relpath(directory, found.root).replace(os.sep, '/')
        for name in sorted(names):
            path = name if relative == '.' else f'{relative}/{name}'
            if name.startswith('shard.') and not name.endswith('.tmp') and path not in named:
                extra.append(path)
    return extra


def run(args: argparse.Namespace) -> int:
    """Verify and report; exit status 1 when any shard is bad."""
    options = storage_options(args)
    with tempfile.TemporaryDirectory(prefix='streaming-verify-index-') as scratch:
        return _run(args, options, open_streamed(args.dataset, args.split, options, scratch, args.format))


def _run(args: argparse.Namespace, options: dict[str, Any], found: DatasetIndex) -> int:

    def report(result: ShardResult) -> None:
        if not result.ok and not args.json:
            from tqdm.auto import tqdm
            tqdm.write(f'BAD shard {result.shard} ({result.file}): {"; ".join(result.problems)}')

    results = verify_dataset(found, hashes=args.hash, decode=not args.no_decode,
                             allow_unsafe_types=args.allow_unsafe_types, options=options, on_result=report,
                             progress=not args.quiet and not args.json)
    bad = [r for r in results if not r.ok]
    extra = unindexed_files(found)
    if args.json:
        print(json.dumps({'index': found.location, 'shards': len(results), 'bad': len(bad),
                          'unindexed': None if found.remote else extra,  # not looked for on a remote
                          'results': [asdict(r) for r in results]}, indent=2))
        return 1 if bad else 0
    checked = sorted({name for r in results for name in r.hashes})
    samples = sum(r.samples for r in results)
    files = sum(r.file_shard == r.shard for r in results)
    shards = (f'{len(results)} {units_word(r.format for r in results)} in {files} file{"" if files == 1 else "s"}'
              if files != len(results) else f'{len(results)} shards')
    good = len(results) - len(bad)
    what = (f'hashes {", ".join(checked)}' if checked else 'sizes only (the index records no hashes)' if good else
            'no shard passed')
    decoded = ('not decoded' if args.no_decode else 'every sample decoded' if not bad else
               f'the samples of {good} good shard{"" if good == 1 else "s"} decoded')
    copies = sum(len(r.copies) for r in results)
    also = (f'; also {copies} decompressed cop{"y" if copies == 1 else "ies"} next to compressed files (what '
            f'readers read): size, {"hashes, " if checked else ""}and bytes against the compressed file' if copies
            else '')
    print(f'Verified {shards}, {samples} samples, {human_bytes(sum(r.checked_bytes for r in results))} '
          f'against {found.location}: {what}; {decoded}{also}.')
    if extra:
        print(f'NOTE: {len(extra)} shard file{" is" if len(extra) == 1 else "s are"} under {found.root} but not named '
              f'by the index (readers never read them; left by an earlier write, or copied in?): '
              f'{", ".join(extra[:10])}{" ..." if len(extra) > 10 else ""}')
    if bad:
        print(f'FAILED: {len(bad)} of {len(results)} shards are bad: '
              f'{", ".join(str(r.shard) for r in bad[:20])}{" ..." if len(bad) > 20 else ""}')
        return 1
    print('OK: every shard matches the index.')
    return 0
