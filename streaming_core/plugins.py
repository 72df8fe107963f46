"""Plugin discovery: builtins plus entry points in the group ``streaming_core``, run into the registries.

Discovery is lazy: nothing happens at ``import streaming_core``. The first registry lookup calls
:func:`ensure_loaded`, which builds a pluggy ``PluginManager``, registers the builtin modules and every
installed entry point through the same path, and calls each plugin's registration hooks with a
:class:`~streaming_core.name_registry.RegistryView` bound to that plugin's name.

Each plugin is checked as it is registered: a hook implementation whose name is not a hook of
:mod:`streaming_core.hookspecs` (``register_codec`` for ``register_codecs``) is a
:class:`~streaming_core.errors.PluginLoadError` naming the plugin, the bad name and the closest hook. Hooks are
called through pluggy, one plugin at a time (builtins first, then entry points sorted by name), so a plugin's
``tryfirst``/``trylast`` implementations and wrappers apply and every name is recorded as the calling plugin's.

Discovery is thread-safe: a lookup made by another thread while discovery runs waits for it to finish; a lookup made
from a hook, by the discovering thread itself, sees the names registered so far.

Environment switches:

* ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD=1``: load only the builtins (no entry points).
* ``STREAMING_CORE_BLOCK_PLUGINS=a,b``: skip the named entry points (or builtins).
"""

from __future__ import annotations

import difflib
import importlib
import os
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from streaming_core import hookspecs
from streaming_core.errors import PluginLoadError
from streaming_core.name_registry import KINDS, Registry, RegistryView

if TYPE_CHECKING:
    import importlib.metadata as md

__all__ = ['BUILTINS', 'PluginInfo', 'ensure_loaded', 'reset', 'plugin_infos', 'register_plugin',
           'unregister_plugin', 'get_plugin_manager', 'registries', 'get_registry', 'ENTRY_POINT_GROUP']

ENTRY_POINT_GROUP = hookspecs.PROJECT
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


# ``pm`` is set last, once every plugin ran its hooks: a non-None ``pm`` means the registries are complete.
# ``loading`` is the ident of the thread running discovery (None when none is): it lets that thread, re-entering from a
# hook, see the names registered so far, while every other thread waits on ``_lock`` for the whole discovery.
_lock = threading.RLock()
_state: dict[str, Any] = {'pm': None, 'infos': {}, 'loading': None}


def _truthy(value: str | None) -> bool:
    return (value or '').strip().lower() not in ('', '0', 'false', 'no', 'off')


def _blocked() -> set[str]:
    return {name.strip() for name in os.environ.get(BLOCK_ENV, '').split(',') if name.strip()}


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, running discovery first if needed."""
    ensure_loaded()
    return _state['pm']


def ensure_loaded() -> None:
    """Run plugin discovery once per process.

    Thread-safe: other threads wait until discovery is complete. Re-entrant: a call from a hook on the discovering
    thread returns at once (the registries then hold what the plugins registered so far).
    """
    if _state['pm'] is not None:
        return
    with _lock:
        if _state['pm'] is not None or _state['loading'] == threading.get_ident():
            return
        _state['loading'] = threading.get_ident()
        try:
            _load()
        except BaseException:
            for registry in _registries.values():  # no half-filled registries; the next lookup tries again
                registry.clear()
            raise
        finally:
            _state['loading'] = None


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
        infos[name] = PluginInfo(name, 'streaming-core', core_version, module_name)
        _register(pm, module, infos[name])
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
            infos[ep.name] = PluginInfo(ep.name, dist, ep.dist.version if ep.dist is not None else '', ep.value)
            _register(pm, plugin, infos[ep.name])
    for info in infos.values():
        _run_hooks(pm, info)
    _state['infos'] = infos
    _state['pm'] = pm


def _entry_points() -> list[md.EntryPoint]:
    import importlib.metadata as md  # not at module import: ``import streaming_core`` stays cheap

    seen: dict[str, md.EntryPoint] = {}
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        seen.setdefault(ep.name, ep)  # the same distribution can appear twice on sys.path
    return sorted(seen.values(), key=lambda ep: ep.name)


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return 'unknown'


def _describe(info: PluginInfo) -> str:
    return f'Plugin {info.name!r} (distribution {info.distribution!r}, {info.module!r})'


def _register(pm: pluggy.PluginManager, plugin: object, info: PluginInfo) -> None:
    """Register one plugin with pluggy and check its hook implementations (signatures and names)."""
    try:
        pm.register(plugin, name=info.name)
    except pluggy.PluginValidationError as err:
        detail = '; '.join(line.strip() for line in str(err).splitlines() if line.strip())
        raise PluginLoadError(f'{_describe(info)} has an invalid hook implementation: {detail}. Fix or uninstall it, '
                              f'or skip it with {BLOCK_ENV}={info.name}.') from err
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as err:
        unknown = _unknown_hooks(pm, plugin) or ['?']
        pm.unregister(plugin)
        valid = sorted(KINDS.values())
        problems = []
        for name in unknown:
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
            hint = f'; did you mean {close[0]!r}?' if close else ''
            problems.append(f'{name!r}{hint}')
        raise PluginLoadError(
            f'{_describe(info)} implements {", ".join(problems)} which is not a streaming_core hook, so it would '
            f'never be called. The hooks are: {", ".join(valid)}. Rename the function, or skip the plugin with '
            f'{BLOCK_ENV}={info.name}.') from err


def _unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """The names of ``plugin``'s hook implementations that match no hook specification (and are not optional)."""
    names = []
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.has_spec():
            continue
        if any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()):
            names.append(caller.name)
    return sorted(names)


def _run_hooks(pm: pluggy.PluginManager, info: PluginInfo) -> None:
    """Call one plugin's registration hooks through pluggy, with views that record that plugin's name."""
    plugin = pm.get_plugin(info.name)
    others = [other for other in pm.get_plugins() if other is not plugin]
    for kind, hook_name in KINDS.items():
        if not any(impl.plugin is plugin for impl in getattr(pm.hook, hook_name).get_hookimpls()):
            continue
        registry = _registries[kind]
        call = pm.subset_hook_caller(hook_name, remove_plugins=others)
        try:
            call(registry=RegistryView(registry, info.name))
        except Exception as err:
            raise PluginLoadError(
                f'Plugin {info.name!r} (distribution {info.distribution!r}) failed in {hook_name}: '
                f'{type(err).__name__}: {err}') from err
        added = registry.names_from(info.name)
        if added:
            info.registered[kind] = added


def plugin_infos() -> list[PluginInfo]:
    """Every loaded plugin with its distribution, version and the names it registered per kind."""
    ensure_loaded()
    with _lock:
        return sorted(_state['infos'].values(), key=lambda i: (i.distribution, i.name))


def register_plugin(plugin: ModuleType | object, name: str, distribution: str = '<in-process>',
                    version: str = '') -> PluginInfo:
    """Register a plugin object in-process (tests, notebooks), through the same path as entry points.

    Raises:
        ValueError: when a plugin named ``name`` is already registered.
        PluginLoadError: when the plugin implements an unknown hook or one of its hooks fails (nothing it
            registered is kept).
    """
    ensure_loaded()
    with _lock:
        pm: pluggy.PluginManager = _state['pm']
        if name in _state['infos']:
            raise ValueError(f'A plugin named {name!r} is already registered.')
        info = PluginInfo(name, distribution, version, getattr(plugin, '__name__', type(plugin).__name__))
        _register(pm, plugin, info)
        try:
            _run_hooks(pm, info)
        except Exception:
            _forget(name)
            raise
        _state['infos'][name] = info
        return info


def _forget(name: str) -> None:
    pm: pluggy.PluginManager = _state['pm']
    for registry in _registries.values():
        for entry_name in registry.names_from(name):
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
        for registry in _registries.values():
            registry.clear()
        _state['pm'] = None
        _state['infos'] = {}


#: The process-wide registries, one per kind; they run discovery (:func:`ensure_loaded`) before each lookup.
_registries: dict[str, Registry] = {kind: Registry(kind, loader=ensure_loaded) for kind in KINDS}


def registries() -> dict[str, Registry]:
    """The process-wide registries, one per kind (discovery still lazy: it runs on the first lookup)."""
    return _registries


def get_registry(kind: str) -> Registry:
    """The registry of one kind (``'codec'``, ``'compressor'``, ``'hash'``, ``'storage'``, ...)."""
    registry = _registries.get(kind)
    if registry is None:
        raise ValueError(f'Unknown registry kind {kind!r}; expected one of {sorted(KINDS)}.')
    return registry


def _after_fork_in_child() -> None:
    """A forked child gets a fresh lock; if another thread of the parent was discovering, the child (which has no
    such thread) forgets the half-done discovery and runs its own on the next lookup."""
    global _lock
    _lock = threading.RLock()
    if _state['loading'] not in (None, threading.get_ident()):
        _state['loading'] = None
        _state['pm'] = None
        _state['infos'] = {}
        for registry in _registries.values():
            registry.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
