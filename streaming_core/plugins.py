"""Plugin discovery: builtins plus entry points in the group ``streaming_core``, run into the registries.

Discovery is lazy: nothing happens at ``import streaming_core``. The first registry lookup calls
:func:`ensure_loaded`, which builds a pluggy ``PluginManager``, registers the builtin modules and every
installed entry point through the same path, and calls each plugin's registration hooks with a
:class:`~streaming_core.registry.RegistryView` bound to that plugin's name.

Environment switches:

* ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD=1``: load only the builtins (no entry points).
* ``STREAMING_CORE_BLOCK_PLUGINS=a,b``: skip the named entry points (or builtins).
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import os
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import pluggy

from streaming_core import hookspecs
from streaming_core.errors import PluginLoadError
from streaming_core.registry import KINDS, Registry, RegistryView, registries

__all__ = ['BUILTINS', 'PluginInfo', 'ensure_loaded', 'reset', 'plugin_infos', 'register_plugin',
           'unregister_plugin', 'get_plugin_manager', 'ENTRY_POINT_GROUP']

ENTRY_POINT_GROUP = 'streaming_core'
DISABLE_ENV = 'STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD'
BLOCK_ENV = 'STREAMING_CORE_BLOCK_PLUGINS'

#: Builtin plugin modules, registered exactly like entry points.
BUILTINS: dict[str, str] = {
    'builtin.local': 'streaming_core.builtin.local',
    'builtin.http': 'streaming_core.builtin.http',
    'builtin.compression': 'streaming_core.builtin.compression',
    'builtin.hashes': 'streaming_core.builtin.hashes',
    'builtin.naive': 'streaming_core.builtin.naive',
    'builtin.random': 'streaming_core.builtin.random_batching',
}


@dataclass
class PluginInfo:
    """What ``streaming plugins`` reports for one plugin."""

    name: str
    distribution: str
    version: str
    module: str
    registered: dict[str, list[str]] = field(default_factory=dict)


_lock = threading.RLock()
_state: dict[str, Any] = {'pm': None, 'infos': {}, 'loading': False}


def _truthy(value: str | None) -> bool:
    return (value or '').strip().lower() not in ('', '0', 'false', 'no', 'off')


def _blocked() -> set[str]:
    return {name.strip() for name in os.environ.get(BLOCK_ENV, '').split(',') if name.strip()}


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, running discovery first if needed."""
    ensure_loaded()
    return _state['pm']


def ensure_loaded() -> None:
    """Run plugin discovery once per process (thread-safe, re-entrant)."""
    if _state['pm'] is not None or _state['loading']:
        return
    with _lock:
        if _state['pm'] is not None or _state['loading']:
            return
        _state['loading'] = True
        try:
            _load()
        finally:
            _state['loading'] = False


def _load() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    blocked = _blocked()
    infos: dict[str, PluginInfo] = {}
    core_version = _version('streaming-core')
    for name, module_name in BUILTINS.items():
        if name in blocked:
            continue
        module = importlib.import_module(module_name)
        pm.register(module, name=name)
        infos[name] = PluginInfo(name, 'streaming-core', core_version, module_name)
    if not _truthy(os.environ.get(DISABLE_ENV)):
        for ep in _entry_points():
            if ep.name in blocked or ep.name in infos:
                continue
            dist = ep.dist.name if ep.dist is not None else '<unknown>'
            try:
                plugin = ep.load()
            except Exception as err:
                raise PluginLoadError(
                    f'Plugin {ep.name!r} (distribution {dist!r}, entry point {ep.value!r}) failed to import: '
                    f'{type(err).__name__}: {err}. Fix or uninstall it, or skip it with '
                    f'{BLOCK_ENV}={ep.name}.') from err
            pm.register(plugin, name=ep.name)
            infos[ep.name] = PluginInfo(ep.name, dist, ep.dist.version if ep.dist is not None else '',
                                        ep.value)
    regs = registries()
    for info in infos.values():
        _run_hooks(pm, info, regs)
    _state['infos'] = infos
    _state['pm'] = pm


def _entry_points() -> list[md.EntryPoint]:
    seen: dict[str, md.EntryPoint] = {}
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        seen.setdefault(ep.name, ep)  # the same distribution can appear twice on sys.path
    return sorted(seen.values(), key=lambda ep: ep.name)


def _version(dist: str) -> str:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return 'unknown'


def _run_hooks(pm: pluggy.PluginManager, info: PluginInfo, regs: dict[str, Registry]) -> None:
    plugin = pm.get_plugin(info.name)
    for kind, hook_name in KINDS.items():
        impls = [impl for impl in getattr(pm.hook, hook_name).get_hookimpls() if impl.plugin is plugin]
        for impl in impls:
            registry = regs[kind]
            try:
                impl.function(registry=RegistryView(registry, info.name))
            except Exception as err:
                raise PluginLoadError(
                    f'Plugin {info.name!r} (distribution {info.distribution!r}) failed in {hook_name}: '
                    f'{type(err).__name__}: {err}') from err
            added = sorted(n for n, e in registry._entries.items() if e.plugin == info.name)
            if added:
                info.registered[kind] = added


def plugin_infos() -> list[PluginInfo]:
    """Every loaded plugin with its distribution, version and the names it registered per kind."""
    ensure_loaded()
    return sorted(_state['infos'].values(), key=lambda i: (i.distribution, i.name))


def register_plugin(plugin: ModuleType | object, name: str, distribution: str = '<in-process>',
                    version: str = '') -> PluginInfo:
    """Register a plugin object in-process (tests, notebooks), through the same path as entry points."""
    ensure_loaded()
    with _lock:
        pm: pluggy.PluginManager = _state['pm']
        if name in _state['infos']:
            raise ValueError(f'A plugin named {name!r} is already registered.')
        pm.register(plugin, name=name)
        info = PluginInfo(name, distribution, version, getattr(plugin, '__name__', type(plugin).__name__))
        try:
            _run_hooks(pm, info, registries())
        except Exception:
            _forget(name)
            raise
        _state['infos'][name] = info
        return info


def _forget(name: str) -> None:
    pm: pluggy.PluginManager = _state['pm']
    for registry in registries().values():
        for entry_name in [n for n, e in registry._entries.items() if e.plugin == name]:
            registry.remove(entry_name)
    if pm.get_plugin(name) is not None:
        pm.unregister(name=name)
    _state['infos'].pop(name, None)


def unregister_plugin(name: str) -> None:
    """Remove an in-process plugin and every name it registered."""
    with _lock:
        if _state['pm'] is not None:
            _forget(name)


def reset() -> None:
    """Forget every registration; the next lookup runs discovery again (used by test helpers)."""
    with _lock:
        for registry in registries().values():
            registry.clear()
        _state['pm'] = None
        _state['infos'] = {}
