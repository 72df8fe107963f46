"""Static declarations of the names each plugin registers, read without importing any plugin.

A plugin distribution declares, beside its entry point in the group ``streaming_core``, every name it registers, one
entry point per name in the group :data:`DECLARATION_GROUP` (``streaming_core.names``): the entry point's name is
``<kind>.<registered name>`` and its value is the plugin's own entry point value (the module), for example::

    [project.entry-points.streaming_core]
    mds = "streaming_mds.plugin"

    [project.entry-points."streaming_core.names"]
    "format.mds" = "streaming_mds.plugin"
    "codec.int" = "streaming_mds.plugin"

With declarations, the first process of an environment (no plugin manifest yet, see
:mod:`streaming_core.machinery.manifest`) looks a name up by importing only the plugin that declares it, instead of
running the full discovery. The declarations are read from the ``entry_points.txt`` files of the distributions on
``sys.path`` (``*.dist-info`` and ``*.egg-info`` directories, the first distribution of a name winning, as
:mod:`importlib.metadata` does) without importing :mod:`importlib.metadata`. The built-in plugins declare theirs in
:data:`BUILTIN_NAMES`.

A declaration is checked against what the plugin really registers when it loads (lazily or by full discovery): a
plugin that registers a name it did not declare, or declares one it does not register, is a
:class:`~streaming_core.errors.PluginLoadError` naming the plugin and the names. A plugin without declarations is
loaded by the full discovery, as before.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable

__all__ = ['DECLARATION_GROUP', 'BUILTIN_NAMES', 'DeclaredPlugin', 'read_declarations', 'parse_entry_points',
           'distribution_name_version', 'declared_manifest', 'declarations_of', 'mismatch']

#: The entry-point group of the declarations: ``<kind>.<name> = <the plugin's entry point value>``.
DECLARATION_GROUP = 'streaming_core.names'
_PLUGIN_GROUP = 'streaming_core'

#: What each built-in plugin registers (checked when it loads, like a distribution's declarations).
BUILTIN_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    'builtin.local': {'storage': ('file',)},
    'builtin.http': {'storage': ('http', 'https')},
    'builtin.compression': {'compressor': ('bz2', 'gz')},
    'builtin.hashes': {'hash': ('blake2b', 'blake2s', 'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha3_224',
                                'sha3_256', 'sha3_384', 'sha3_512', 'sha512', 'xxh128', 'xxh32', 'xxh3_128',
                                'xxh3_64', 'xxh64')},
    'builtin.naive': {'shuffle': ('naive',)},
    'builtin.random': {'batching': ('random',)},
    'builtin.streams': {'stream': ('stream',)},
}


@dataclass
class DeclaredPlugin:
    """One plugin entry point and the names its distribution declares for it.

    Attributes:
        name: The entry point's name (the plugin name).
        value: The entry point's value (``module[:attr]``).
        metadata: The distribution's metadata directory (``*.dist-info`` / ``*.egg-info``).
        names: ``{kind: {names}}`` declared for this plugin; None when it declares nothing (full discovery).
    """

    name: str
    value: str
    metadata: str
    names: dict[str, set[str]] | None = field(default=None)


def parse_entry_points(text: str) -> dict[str, list[tuple[str, str]]]:
    """``{group: [(name, value), ...]}`` of an ``entry_points.txt`` (INI sections, ``name = value`` lines)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in '#;':
            continue
        if line.startswith('[') and line.endswith(']'):
            current = groups.setdefault(line[1:-1].strip(), [])
            continue
        name, sep, value = line.partition('=')
        if sep and current is not None:
            current.append((name.strip(), value.strip()))
    return groups


def _normalize(name: str) -> str:
    return name.lower().replace('-', '_').replace('.', '_')


def _metadata_dirs(path: list[str]) -> list[tuple[str, str]]:
    """``(normalized distribution name, metadata directory)`` on ``path``, in search order, first name winning."""
    seen: set[str] = set()
    found = []
    for entry in path:
        directory = os.path.abspath(entry or os.curdir)
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for child in names:
            if not child.endswith(('.dist-info', '.egg-info')):
                continue
            stem = child[:-10] if child.endswith('.dist-info') else child[:-9]
            dist = _normalize(stem.partition('-')[0])
            if dist in seen:
                continue
            seen.add(dist)
            found.append((dist, os.path.join(directory, child)))
    return found


def read_declarations(path: list[str] | None = None,
                      metadata_dirs: dict[str, str] | None = None) -> dict[str, DeclaredPlugin]:
    """Every plugin entry point of the group ``streaming_core`` on ``path`` (default ``sys.path``) by plugin name,
    the first of a name winning, with the names its distribution declares for it (see the module doc).

    Args:
        path: Where to look (default ``sys.path``).
        metadata_dirs: If given, filled with ``{normalized distribution name: metadata directory}``.
    """
    plugins: dict[str, DeclaredPlugin] = {}
    for dist, metadata in _metadata_dirs(sys.path if path is None else path):
        if metadata_dirs is not None:
            metadata_dirs[dist] = metadata
        try:
            with open(os.path.join(metadata, 'entry_points.txt'), encoding='utf-8', errors='replace') as f:
                text = f.read()
        except OSError:
            continue
        if _PLUGIN_GROUP not in text:
            continue
        groups = parse_entry_points(text)
        declared: dict[str, dict[str, set[str]]] = {}
        for key, value in groups.get(DECLARATION_GROUP, []):
            kind, dot, name = key.partition('.')
            if dot and name:
                declared.setdefault(value, {}).setdefault(kind, set()).add(name)
        for name, value in groups.get(_PLUGIN_GROUP, []):
            if name not in plugins:
                plugins[name] = DeclaredPlugin(name, value, metadata, declared.get(value))
    return plugins


def distribution_name_version(metadata: str) -> tuple[str, str]:
    """The ``Name`` and ``Version`` fields of a metadata directory (``METADATA`` or ``PKG-INFO``)."""
    name = version = ''
    for filename in ('METADATA', 'PKG-INFO'):
        try:
            with open(os.path.join(metadata, filename), encoding='utf-8', errors='replace') as f:
                for line in f:
                    if not line.strip():
                        break
                    if line.startswith('Name:') and not name:
                        name = line[5:].strip()
                    elif line.startswith('Version:') and not version:
                        version = line[8:].strip()
        except OSError:
            continue
        break
    if not name:
        stem = os.path.splitext(os.path.basename(metadata))[0]
        name, _, rest = stem.partition('-')
        version = version or rest.partition('-')[0]
    return name, version


def mismatch(plugin: str, declared: dict[str, set[str]] | dict[str, tuple[str, ...]],
             registered: dict[str, list[str]]) -> str | None:
    """The error message when ``plugin``'s ``registered`` names differ from its ``declared`` ones, else None."""
    problems = []
    for kind in sorted(set(declared) | set(registered)):
        want, got = set(declared.get(kind, ())), set(registered.get(kind, ()))
        if got - want:
            problems.append(f'registers {kind} {sorted(got - want)} without declaring them')
        if want - got:
            problems.append(f'declares {kind} {sorted(want - got)} but does not register them')
    if not problems:
        return None
    return (f'Plugin {plugin!r} {"; ".join(problems)}. Its declarations (entry points "<kind>.<name>" of the group '
            f'{DECLARATION_GROUP!r}) must list exactly the names it registers, so that a lookup imports only the '
            f'plugin that declares the name: fix them and reinstall the distribution.')


def declared_manifest(builtins: Iterable[tuple[str, str]], autoload: bool, blocked: set[str],
                      kinds: Iterable[str]) -> dict[str, Any] | None:
    """``{'plugins': ..., 'names': ...}`` (the plugin manifest's shape) from the declarations of ``builtins`` (``(plugin
    name, module)`` pairs of :data:`BUILTIN_NAMES`) and, when ``autoload``, of the entry points on ``sys.path``; None
    when one of those entry points (not ``blocked``) declares nothing: the names it registers are unknown, and one of
    them could be a declared name registered twice, so the first lookup runs the full discovery as before.

    Each plugin's source carries its ``declared`` names (checked when it loads) and ``metadata`` directory. A name
    two plugins declare is left out: its lookup runs the full discovery, which reports the conflict."""
    plugins: dict[str, dict[str, Any]] = {}
    dirs: dict[str, str] = {}
    for name, module in builtins:
        if name in BUILTIN_NAMES:
            plugins[name] = {'module': module, 'origin': 'builtin', 'declared': BUILTIN_NAMES[name]}
    found = read_declarations(metadata_dirs=dirs) if autoload else {}
    for name, plugin in found.items():
        if name in blocked or name in plugins:
            continue
        if plugin.names is None:
            return None
        if name not in plugins:
            plugins[name] = {'module': plugin.value, 'origin': 'entry_point', 'metadata': plugin.metadata,
                             'declared': plugin.names}
    names: dict[str, dict[str, str]] = {kind: {} for kind in kinds}
    twice: set[tuple[str, str]] = set()
    for name, source in plugins.items():
        if source['origin'] == 'builtin' and 'streaming_core' in dirs:
            source['metadata'] = dirs['streaming_core']
        for kind, declared in source['declared'].items():
            for entry in declared:
                if names.setdefault(kind, {}).setdefault(entry, name) != name:
                    twice.add((kind, entry))
    for kind, entry in twice:
        names[kind].pop(entry, None)
    return {'plugins': plugins, 'names': names}


def declarations_of(loaded: list[tuple[str, str, bool]]) -> dict[str, Any]:
    """``{plugin: declared names}`` of plugins a full discovery loaded, given as ``(plugin name, entry point value or
    module, is a known builtin)``; plugins that declare nothing are absent."""
    table: dict[str, Any] = {}
    found: dict[str, DeclaredPlugin] | None = None
    for name, value, builtin in loaded:
        if builtin:
            if name in BUILTIN_NAMES:
                table[name] = BUILTIN_NAMES[name]
            continue
        if found is None:
            found = read_declarations()
        plugin = found.get(name)
        if plugin is not None and plugin.value == value and plugin.names is not None:
            table[name] = plugin.names
    return table
