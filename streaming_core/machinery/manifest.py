"""The plugin manifest: which plugin registers which names, cached per environment so a lookup imports one plugin.

A full plugin discovery (every builtin and entry point imported, every hook called) records, per kind, the plugin that
registered each name, and where each plugin comes from (a builtin module, or an entry point's value and
distribution). The record is written atomically to ``<cache root>/state/plugin-manifest-<environment>.json``
(:func:`manifest_path`, one file per Python environment), keyed by the installed distributions
(:func:`environment_key`). The file keeps the records of the last :data:`MAX_KEYS` keys, so scripts run from
directories that change what is importable (an in-tree ``*.egg-info`` on ``sys.path[0]``) do not rebuild it in turn.

The key is computed without importing :mod:`importlib.metadata` or reading any entry-point file: it is a digest of
every package-metadata entry on ``sys.path`` (``*.dist-info``, ``*.egg-info``, ``*.egg-link``, ``*.pth`` and the
``__editable__`` finders), by name, with the modification time of its ``entry_points.txt`` for a metadata directory
and its own for the others. Installing, upgrading, uninstalling or reinstalling (editable or not) a distribution
changes it (a new name, or a new ``entry_points.txt``), so the manifest is rebuilt by the next full discovery. A
manifest that cannot be read, has another format version or another key is ignored (never trusted); one whose plugin
turns out not to register the name it claims is distrusted by the host, which then runs a full discovery and
rewrites it. Without a manifest, a host whose plugins all declare their names
(:mod:`~streaming_core.machinery.declarations`) writes the declarations in the same shape, each plugin's
``declared`` names included, so that loading it from the manifest still checks them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

__all__ = ['MANIFEST_VERSION', 'environment_key', 'manifest_path', 'read_manifest', 'write_manifest']

#: The format version of the manifest file; another version is ignored.
MANIFEST_VERSION = 2
#: How many environment keys one manifest file remembers (the least recently written are dropped).
MAX_KEYS = 8
_METADATA_DIRS = ('.dist-info', '.egg-info')
_SUFFIXES = _METADATA_DIRS + ('.egg-link', '.pth')


def _stamp_at(fd: int, name: str) -> int:
    """The mtime (ns) of ``name`` relative to the directory open as ``fd``, or -1 when it cannot be statted."""
    try:
        return os.stat(name, dir_fd=fd).st_mtime_ns
    except OSError:
        return -1


def environment_key(path: list[str] | None = None) -> str:
    """A digest of the installed distributions' metadata on ``path`` (default ``sys.path``): names and mtimes, in
    the order of ``path`` (the first distribution found of a name is the one whose plugins load).

    Cheap (one directory listing per ``sys.path`` entry and one ``stat`` per metadata entry, relative to the open
    directory); it imports nothing. A metadata directory counts with its ``entry_points.txt`` (where its plugins are
    declared), any other entry with its own mtime (a ``.pth`` file, an ``__editable__`` finder, an ``.egg-link``).
    """
    stamps: list[tuple[str, int]] = []  # in sys.path order: it decides which of two distributions' plugins wins
    for entry in sys.path if path is None else path:
        directory = os.path.abspath(entry or os.curdir)
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:  # a zip file or a missing directory: its own stamp
            try:
                stamps.append((directory, os.stat(directory).st_mtime_ns))
            except OSError:
                pass
            continue
        try:  # a directory without distributions adds nothing (the working directory, a script's: the key is one)
            for name in sorted(os.listdir(fd)):
                if name.endswith(_METADATA_DIRS):
                    stamps.append((f'{directory}{os.sep}{name}', _stamp_at(fd, f'{name}{os.sep}entry_points.txt')))
                elif name.endswith(_SUFFIXES) or name.startswith('__editable__'):
                    stamps.append((f'{directory}{os.sep}{name}', _stamp_at(fd, name)))
        finally:
            os.close(fd)
    text = f'{MANIFEST_VERSION}\0{sys.version_info[:2]}\0' + ''.join(f'{p}\0{m}\n' for p, m in stamps)
    return hashlib.blake2s(text.encode('utf-8', 'surrogateescape'), digest_size=16).hexdigest()


def manifest_path() -> str:
    """``<cache root>/state/plugin-manifest-<digest of sys.prefix>.json``: one manifest per Python environment."""
    from streaming_core.common.paths import state_root
    env = hashlib.blake2s(os.path.realpath(sys.prefix).encode('utf-8'), digest_size=8).hexdigest()
    return os.path.join(state_root(), f'plugin-manifest-{env}.json')


def _valid(data: Any) -> bool:
    """True when ``data`` is one key's record with the expected shape."""
    if not isinstance(data, dict):
        return False
    plugins, names = data.get('plugins'), data.get('names')
    if not isinstance(plugins, dict) or not isinstance(names, dict):
        return False
    for info in plugins.values():
        if not isinstance(info, dict) or not isinstance(info.get('module'), str):
            return False
    for table in names.values():
        if not isinstance(table, dict) or not all(isinstance(p, str) and p in plugins for p in table.values()):
            return False
    return True


def _read_file(path: str) -> dict[str, Any]:
    """The ``{key: record}`` table of the file, empty when it is missing, unreadable or of another version."""
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get('version') != MANIFEST_VERSION or \
            not isinstance(data.get('manifests'), dict):
        return {}
    return data['manifests']


def read_manifest(key: str, path: str | None = None) -> dict[str, Any] | None:
    """The record (``{'plugins': ..., 'names': ...}``) for ``key`` in the file at ``path`` (default
    :func:`manifest_path`) when it is there and well formed, else None."""
    record = _read_file(path or manifest_path()).get(key)
    return record if _valid(record) else None


def write_manifest(key: str, plugins: dict[str, dict[str, str]], names: dict[str, dict[str, str]],
                   path: str | None = None) -> str | None:
    """Record ``key``'s manifest atomically (a unique temporary name, then a rename); return the file's path, or None
    when the cache root is not writable (the manifest is an optimisation: failing to write it is not an error).

    Args:
        key: The :func:`environment_key` it is valid for.
        plugins: ``{plugin name: {'module': ..., 'origin': 'builtin' | 'entry_point', 'distribution': ...,
            'version': ...}}``.
        names: ``{kind: {registered name: plugin name}}``.
        path: Where to write (default :func:`manifest_path`).
    """
    import time

    path = path or manifest_path()
    table = {k: v for k, v in _read_file(path).items() if _valid(v) and k != key}
    table[key] = {'plugins': plugins, 'names': names, 'written': time.time()}
    keep = sorted(table, key=lambda k: table[k].get('written', 0) if isinstance(table[k].get('written'),
                                                                                   (int, float)) else 0)[-MAX_KEYS:]
    data = {'version': MANIFEST_VERSION, 'manifests': {k: table[k] for k in keep}}
    tmp = f'{path}.{os.getpid()}.{id(data):x}.tmp'
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, 'w', encoding='utf-8') as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return path
