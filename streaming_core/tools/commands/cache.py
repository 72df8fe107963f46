"""``streaming cache [show|clear]``: what the local cache holds, and removing it.

The cache root is :func:`streaming_core.common.paths.cache_root` (``$STREAMING_CORE_CACHE_DIR``, else
``$XDG_CACHE_HOME/streaming-core``, else ``~/.cache/streaming-core``). Under it:

* ``datasets/<digest>/``: downloaded shards of datasets opened without an explicit ``local`` (the digest is derived
  from the remote URL; every file there has a remote copy);
* ``plans/``: per-node epoch plans (``.npy``), recomputed on demand (bounded: see
:mod:`streaming_core.ordering.plan_cache`);
* ``cache-state/``: cache accounting files of datasets with a ``cache_limit``, rebuilt on demand;
* ``state/<digest>/``: what streaming-core keeps about each local directory it has read (default or explicit
  ``local``): its lock file and the record of the remote and index version it holds
  (:mod:`streaming_core.reading.cache_record`). ``show`` lists each dataset with the remote it holds.

``clear`` removes the dataset directories and the files of the other three (or one dataset directory and its
state), never anything else under the root. It keeps the lock files (a running job or writer holds them: removed,
the next process would lock a new file and the two would not exclude each other), the cache-limit accounts (marked
to be recounted from the disk, so that running and later jobs share one), and the records of local directories
written or read in place (datasets of their own: the record is what refuses such a directory as the cache of a
remote).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any

from streaming_core.storage.redact import redact_url
from streaming_core.tools.commands._common import human_bytes

__all__ = ['add_parser', 'run', 'scan_cache', 'MANAGED']

#: The subdirectories of the cache root that streaming-core manages (and ``clear`` may remove).
MANAGED = ('datasets', 'plans', 'cache-state', 'state')
#: How many of the paths ``clear`` removes it lists one by one.
_SHOWN = 40


def add_parser(subparsers: Any) -> None:
    """Register the subcommand and its actions."""
    parser = subparsers.add_parser(
        'cache', help='show or clear the local cache (downloaded datasets, epoch plans, cache state)',
        description='Show the local cache: its root, the datasets downloaded under it with their sizes and the '
                    'remote each holds, the other local directories read with a remote, the epoch plan files and the '
                    'cache-state files. "streaming cache clear" removes them (asking first).')
    parser.add_argument('--json', action='store_true', help='print JSON instead of text')
    actions = parser.add_subparsers(dest='action', metavar='<action>')
    show = actions.add_parser('show', help='show the cache (the default)', description='Show the local cache.')
    show.add_argument('--json', action='store_true', default=argparse.SUPPRESS, help='print JSON instead of text')
    clear = actions.add_parser(
        'clear', help='remove cached datasets, plans and cache state',
        description='Remove the cached datasets, plan files and cache-state files (or one dataset). Jobs running '
                    'on this node lose their local copies and download them again.')
    clear.add_argument('--dataset', metavar='NAME|URL', default=None,
                       help='remove only this dataset: its directory name under datasets/, or its remote URL')
    clear.add_argument('--yes', '-y', action='store_true', help='do not ask for confirmation')
    parser.set_defaults(run=run, action=None)


def _usage(path: str) -> tuple[int, int]:
    """``(bytes, files)`` under ``path``."""
    total = files = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def _size(path: str) -> int:
    """Bytes under ``path``, a directory or a file."""
    if os.path.isdir(path) and not os.path.islink(path):
        return _usage(path)[0]
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _record_info(local_dir: str) -> dict[str, Any] | None:
    from streaming_core.reading.cache_record import record_of
    record = record_of(local_dir)
    if record is None:
        return None
    return {'remote': _shown_remote(record), 'remote_dir': record.remote_dir, 'split': record.split,
            'index_identity': record.source_identity, 'checked_at': record.checked_at}


def _shown_remote(record: Any) -> str:
    """The record's remote as written, or, for a relative path, the absolute one its directory was recorded as."""
    from streaming_core.storage.url import url_scheme
    if url_scheme(record.remote) != '' or os.path.isabs(record.remote) or not os.path.isabs(record.remote_dir):
        return record.remote
    if record.split:
        return os.path.dirname(record.remote_dir.rstrip(os.sep)) if \
            os.path.basename(record.remote_dir.rstrip(os.sep)) == record.split else record.remote_dir
    return record.remote_dir


def _dataset_info(path: str) -> dict[str, Any]:
    size, files = _usage(path)
    splits = []
    for dirpath, dirs, names in os.walk(path):
        if 'index.json' in names:
            splits.append(os.path.relpath(dirpath, path).replace(os.sep, '/'))
        if os.path.relpath(dirpath, path).count(os.sep) >= 1:
            dirs[:] = []
    samples = shards = 0
    records = {}
    for split in splits:
        record = _record_info(os.path.normpath(os.path.join(path, split)))
        if record is not None:
            records[split] = record
        try:
            with open(os.path.join(path, split, 'index.json'), 'rb') as handle:
                index = json.loads(handle.read())
            shards += len(index.get('shards', []))
            samples += sum(int(entry.get('samples') or 0) for entry in index.get('shards', []))
        except (OSError, ValueError, TypeError, AttributeError):
            pass
    remotes = sorted({r['remote'] for r in records.values()})
    return {'name': os.path.basename(path), 'path': path, 'bytes': size, 'files': files,
            'splits': sorted(splits), 'shards_in_index': shards, 'samples_in_index': samples,
            'modified': os.path.getmtime(path), 'remote': remotes[0] if len(remotes) == 1 else (remotes or None),
            'records': records}


def _state_info(root: str) -> dict[str, Any]:
    """The state directories: the local directory each describes and the remote it holds."""
    from streaming_core.reading.cache_record import is_in_place, read_record
    path = os.path.join(root, 'state')
    size, files = _usage(path) if os.path.isdir(path) else (0, 0)
    entries = []
    if os.path.isdir(path):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            record = read_record(entry.path)
            item: dict[str, Any] = {'key': entry.name, 'path': entry.path, 'local_dir': None, 'remote': None}
            if record is not None:
                item.update(local_dir=record.local_dir, remote=record.remote, remote_dir=record.remote_dir,
                            split=record.split, index_identity=record.source_identity,
                            checked_at=record.checked_at, local_exists=os.path.isdir(record.local_dir),
                            in_place=is_in_place(record.remote_dir, record.local_dir))
            entries.append(item)
    return {'path': path, 'bytes': size, 'files': files, 'count': len(entries), 'entries': entries}


def scan_cache(root: str) -> dict[str, Any]:
    """What the cache root holds (see the module docstring)."""
    datasets_dir = os.path.join(root, 'datasets')
    datasets = []
    if os.path.isdir(datasets_dir):
        for entry in sorted(os.scandir(datasets_dir), key=lambda e: e.name):
            if entry.is_dir():
                datasets.append(_dataset_info(entry.path))
    result: dict[str, Any] = {'root': root, 'exists': os.path.isdir(root), 'datasets': datasets}
    for name, suffix in (('plans', '.npy'), ('cache-state', '.bin')):
        path = os.path.join(root, name)
        size, files = _usage(path) if os.path.isdir(path) else (0, 0)
        count = len([n for n in os.listdir(path) if n.endswith(suffix)]) if os.path.isdir(path) else 0
        result[name.replace('-', '_')] = {'path': path, 'bytes': size, 'files': files, 'count': count}
    result['state'] = _state_info(root)
    others = sorted(name for name in os.listdir(root) if name not in MANAGED) if os.path.isdir(root) else []
    result['other_entries'] = others
    result['bytes'] = (sum(d['bytes'] for d in datasets) + result['plans']['bytes'] + result['cache_state']['bytes']
                       + result['state']['bytes'])
    return result


def _show(info: dict[str, Any]) -> None:
    print(f'Cache root: {info["root"]}{"" if info["exists"] else " (does not exist yet)"}')
    print(f'Total:      {human_bytes(info["bytes"])}')
    print(f'Datasets:   {len(info["datasets"])} under {os.path.join(info["root"], "datasets")}')
    for d in info['datasets']:
        age = time.strftime('%Y-%m-%d %H:%M', time.localtime(d['modified']))
        splits = ', '.join(s if s != '.' else '(root)' for s in d['splits']) or 'no index'
        remote = redact_url(d['remote']) if isinstance(d['remote'], str) else \
            ', '.join(redact_url(r) for r in d['remote'] or []) or 'unknown (no record)'
        print(f'  {d["name"]}  {human_bytes(d["bytes"]):>10}  {d["files"]:>6} files  {d["shards_in_index"]} shards, '
              f'{d["samples_in_index"]} samples in index  splits: {splits}  modified {age}')
        print(f'      remote: {remote}')
    datasets_dir = os.path.realpath(os.path.join(info['root'], 'datasets'))
    elsewhere = [e for e in info['state']['entries'] if e['local_dir']
                 and not e['local_dir'].startswith(datasets_dir + os.sep)]
    own = [e for e in elsewhere if e.get('in_place')]
    copies = [e for e in elsewhere if not e.get('in_place')]
    if own:
        print(f'Local datasets written or read in place (no remote; their files are never cleared): {len(own)}')
        for e in own:
            print(f'  {e["local_dir"]}{"" if e.get("local_exists") else "  (directory no longer exists)"}')
    if copies:
        print(f'Other local directories read with a remote: {len(copies)}')
        for e in copies:
            gone = '' if e.get('local_exists') else '  (directory no longer exists)'
            print(f'  {e["local_dir"]}  remote: {redact_url(e["remote_dir"])}{gone}')
    plans, state = info['plans'], info['cache_state']
    print(f'Plans:      {plans["count"]} epoch plan files, {human_bytes(plans["bytes"])} ({plans["path"]})')
    print(f'Cache state: {state["count"]} files, {human_bytes(state["bytes"])} ({state["path"]})')
    print(f'State:      {info["state"]["count"]} local directories, {human_bytes(info["state"]["bytes"])} '
          f'({info["state"]["path"]})')
    if info['other_entries']:
        print(f'Other (not managed, never cleared): {", ".join(info["other_entries"])}')


def _targets(root: str, dataset: str | None) -> list[str]:
    """What ``clear`` removes: whole dataset directories, and in the other managed directories every file but the
    lock files (see :func:`_removable`) and the records of datasets of their own."""
    if dataset is None:
        found = []
        kept = set(_own_datasets(root))
        for name in MANAGED:
            path = os.path.join(root, name)
            if name == 'datasets':
                if os.path.isdir(path):
                    found.append(path)
            elif name != 'cache-state' and os.path.isdir(path):  # accounts are kept and recounted (_recount)
                found += [p for p in _removable(path) if not any(p.startswith(k + os.sep) for k in kept)]
        return found
    from streaming_core.common.paths import default_local
    from streaming_core.storage.facade import is_remote
    places = [] if is_remote(dataset) or '/' in dataset else [os.path.join(root, 'datasets', dataset)]
    places.append(default_local(dataset.rstrip('/')))  # a remote URL or path (a relative path: from here)
    for path in places:
        if os.path.isdir(path):
            return [path, *(p for state in _state_dirs_of(root, path) for p in _removable(state))]
    looked = ' and '.join(places)
    raise FileNotFoundError(f'No cached dataset {dataset!r} (looked for {looked}; a relative path names the '
                            f'remote as seen from the current directory). "streaming cache" lists the cached '
                            f'datasets.')


def _removable(directory: str) -> list[str]:
    """The files under ``directory`` but its lock files (``*.lock``): a running job or writer may hold one (its
    index, shard and output locks are record locks on these files), and were one removed, the next process would
    lock a new file of that name and the two would no longer exclude each other. Lock files are empty or a few
    bytes."""
    found = []
    for dirpath, _, names in os.walk(directory):
        found += [os.path.join(dirpath, name) for name in sorted(names) if not name.endswith('.lock')]
    return sorted(found)


def _recount(root: str) -> int:
    """Mark every cache-limit account under ``root`` as to be recounted from the disk by the next process that opens
    it (its datasets were just removed), instead of removing it: a running job keeps sharing it with the jobs that
    start after. Returns how many were marked."""
    from streaming_core.reading.cache_limit import mark_for_recount
    folder = os.path.join(root, 'cache-state')
    marked = 0
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith('.bin') and mark_for_recount(os.path.join(folder, name)):
            marked += 1
    return marked


def _state_dirs_of(root: str, path: str) -> list[str]:
    """The state directories of ``path`` and of the directories under it."""
    from streaming_core.reading.cache_record import read_record
    real = os.path.realpath(path)
    found = []
    state = os.path.join(root, 'state')
    if os.path.isdir(state):
        for entry in sorted(os.scandir(state), key=lambda e: e.name):
            record = read_record(entry.path) if entry.is_dir() else None
            if record is not None and (record.local_dir == real or record.local_dir.startswith(real + os.sep)):
                found.append(entry.path)
    return found


def _own_datasets(root: str) -> list[str]:
    """The state directories whose record is of an existing local directory written or read in place (a dataset of
    its own): kept by ``clear``, since the record is what refuses that directory as another remote's cache."""
    from streaming_core.reading.cache_record import is_in_place, read_record
    state = os.path.join(root, 'state')
    kept = []
    for entry in sorted(os.scandir(state), key=lambda e: e.name) if os.path.isdir(state) else []:
        record = read_record(entry.path) if entry.is_dir() else None
        if record is not None and is_in_place(record.remote_dir, record.local_dir) and os.path.isdir(record.local_dir):
            kept.append(entry.path)
    return kept


def _confirm(paths: list[str]) -> bool:
    if not sys.stdin or not sys.stdin.isatty():
        raise ValueError('Refusing to clear the cache without confirmation: stdin is not a terminal. Pass --yes.')
    answer = input(f'Remove {len(paths)} item(s), {human_bytes(sum(_size(p) for p in paths))}? [y/N] ')
    return answer.strip().lower() in ('y', 'yes')


def run(args: argparse.Namespace) -> int:
    """Show or clear the cache."""
    from streaming_core.common.paths import cache_root
    root = cache_root()
    if args.action != 'clear':
        info = scan_cache(root)
        if args.json:
            print(json.dumps(info, indent=2))
        else:
            _show(info)
        return 0
    if getattr(args, 'json', False):
        raise ValueError('--json prints what "streaming cache" shows; "streaming cache clear" reports in text: leave '
                         '--json out.')
    paths = _targets(root, args.dataset)
    if not paths:
        print(f'Nothing to clear under {root}.')
        return 0
    for path in paths[:_SHOWN]:
        print(f'  {path}  ({human_bytes(_size(path))})')
    if len(paths) > _SHOWN:
        print(f'  ... and {len(paths) - _SHOWN} more files, {human_bytes(sum(_size(p) for p in paths[_SHOWN:]))}')
    own = _own_datasets(root) if args.dataset is None else []
    if own:
        print(f'Kept: the records of {len(own)} local dataset(s) written or read in place (they refuse those '
              f'directories as the cache of a remote, which would replace their files).')
    print('Kept: the lock files (running jobs and writers hold them) and the cache-limit accounts (recounted from '
          'the disk by the next job).')
    if not args.yes and not _confirm(paths):
        print('Nothing removed.')
        return 1
    freed = 0
    for path in paths:
        freed += _size(path)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except FileNotFoundError:  # removed meanwhile (a running job's own cleanup)
            pass
    _recount(root)
    print(f'Removed {len(paths)} item(s), {human_bytes(freed)}.')
    return 0
