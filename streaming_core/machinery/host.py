"""The plugin host: one object owning the pluggy manager, the registries and the plugin infos.

A :class:`PluginHost` discovers plugins lazily. A lookup of a name that is not registered yet consults the plugin
manifest (:mod:`streaming_core.machinery.manifest`: which plugin registered which names, cached per environment) and
imports only the plugin that registers it; listing names, or a name the manifest does not know, runs the full
discovery: the builtins (:data:`BUILTINS`) and every entry point of the group ``streaming_core``, sorted by name,
registered through the same path. A full discovery writes the manifest when the environment changed.

Each plugin is checked as it is registered (pluggy's ``check_pending``): a hook implementation whose name is not a
hook of :mod:`streaming_core.hookspecs` (``register_codec`` for ``register_codecs``) is a
:class:`~streaming_core.errors.PluginLoadError` naming the plugin, the bad name and the closest hook. Hooks are called
through pluggy one plugin at a time, with a :class:`~streaming_core.machinery.name_registry.RegistryView` recording that
plugin's name.

Thread-safe: a lookup made by another thread while the host loads waits for it; a lookup made from a hook, by the
loading thread itself, sees the names registered so far. Fork-safe: a forked child whose parent was loading in
another thread starts afresh. A host pickles as its :class:`HostConfig` (never pluggy state): a spawned worker
rebuilds it and discovers again; the process default host unpickles as the worker's own default host.

The process default host (:func:`default_host`) is created on first use; :func:`using_host` makes another host
current in a block (a context variable), and :func:`set_default_host` replaces the default.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import hashlib
import importlib
import json
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Iterator

import pluggy

from streaming_core import hookspecs
from streaming_core.errors import PluginLoadError
from streaming_core.machinery import declarations as plugin_declarations
from streaming_core.machinery import fork_hazard
from streaming_core.machinery import forking as plugin_forking
from streaming_core.machinery import manifest as plugin_manifest
from streaming_core.machinery.host_config import BLOCK_ENV, BUILTINS, DISABLE_ENV, MANIFEST_ENV, HostConfig, PluginInfo
from streaming_core.machinery.name_registry import KINDS, Registry, RegistryView

if TYPE_CHECKING:
    import importlib.metadata as md

__all__ = ['BUILTINS', 'DISABLE_ENV', 'BLOCK_ENV', 'MANIFEST_ENV', 'HostConfig', 'PluginInfo', 'PluginHost',
           'default_host', 'set_default_host', 'using_host', 'current_host', 'get_registry']

def _load_object(value: str) -> Any:
    """Import an entry point value ``module[:attr.path]`` without :mod:`importlib.metadata`."""
    module_name, _, attrs = value.partition(':')
    obj: Any = importlib.import_module(module_name.strip())
    for attr in filter(None, attrs.strip().split('.')):
        obj = getattr(obj, attr)
    return obj


def _entry_points() -> list[md.EntryPoint]:
    import importlib.metadata as md  # not at module import: ``import streaming_core`` stays cheap

    seen: dict[str, md.EntryPoint] = {}
    for ep in md.entry_points(group=hookspecs.ENTRY_POINT_GROUP):
        seen.setdefault(ep.name, ep)  # the same distribution can appear twice on sys.path
    return sorted(seen.values(), key=lambda ep: ep.name)


def _version(dist: str) -> str:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return 'unknown'


_hosts: weakref.WeakSet[PluginHost] = weakref.WeakSet()


class PluginHost:
    """The pluggy manager, the registries (one per kind of :data:`~streaming_core.hookspecs.KINDS`) and the plugin
    infos of one plugin set, loaded lazily.

    Args:
        config: What to load (default: the builtins, entry points and switches from the environment).
    """

    def __init__(self, config: HostConfig | None = None) -> None:
        self.config = config or HostConfig()
        self._lock = threading.RLock()
        self._loading: int | None = None  # the ident of the thread loading plugins, if any
        self._complete = False  # every plugin of the config is loaded
        self._pm: pluggy.PluginManager | None = None
        self._infos: dict[str, PluginInfo] = {}
        self._manifest: dict[str, Any] | None = None
        self._manifest_state = 'unread'  # 'unread', 'trusted', 'declared', 'absent' or 'distrusted'
        self._manifest_key = ''
        self.registries: dict[str, Registry] = {
            kind: Registry(kind, loader=self.ensure_loaded, name_loader=self._name_loader(kind), busy=self._busy,
                           kind_loader=functools.partial(self.load_kind, kind),
                           name_checker=functools.partial(self.declares, kind),
                           fingerprinter=functools.partial(self.names_fingerprint, kind))
            for kind in KINDS}
        _hosts.add(self)

    def _name_loader(self, kind: str) -> Any:
        def load(name: str) -> None:
            self.load_name(kind, name)
        return load

    def _busy(self) -> bool:
        """True while another thread loads plugins into this host."""
        loading = self._loading
        return loading is not None and loading != threading.get_ident()

    def __repr__(self) -> str:
        return f'PluginHost(loaded={sorted(self._infos)}, complete={self._complete})'

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self is _default['host']:
            return default_host, ()
        return PluginHost, (self.config,)

    # Lookups.
    def registry(self, kind: str) -> Registry:
        """The registry of one kind (``'codec'``, ``'compressor'``, ``'hash'``, ``'storage'``, ``'converter'``...)."""
        registry = self.registries.get(kind)
        if registry is None:
            raise ValueError(f'Unknown registry kind {kind!r}; expected one of {sorted(KINDS)}.')
        return registry

    @property
    def complete(self) -> bool:
        """True once every plugin of the configuration is loaded."""
        return self._complete

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The pluggy manager, after a full discovery."""
        self.ensure_loaded()
        assert self._pm is not None
        return self._pm

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin with its distribution, version and the names it registered per kind (loads everything)."""
        self.ensure_loaded()
        with self._lock:
            return sorted(self._infos.values(), key=lambda i: (i.distribution, i.name))

    def loaded_plugins(self) -> list[str]:
        """The names of the plugins loaded so far (no discovery)."""
        with self._lock:
            return list(self._infos)

    # Loading.
    def ensure_loaded(self) -> None:
        """Load every plugin of the configuration (once).

        Thread-safe: other threads wait until it is complete. Re-entrant: a call from a hook on the loading thread
        returns at once (the registries then hold what the plugins registered so far).
        """
        if self._complete:
            return
        with self._lock:
            if self._complete or self._loading == threading.get_ident():
                return
            self._loading = threading.get_ident()
            try:
                self._load_all()
            except BaseException:
                self._clear()  # no half-filled registries; the next lookup tries again
                raise
            finally:
                self._loading = None

    def load_name(self, kind: str, name: str) -> None:
        """Load the plugin the manifest names for ``name`` of ``kind``, if any (no-op when it names none, the
        manifest is absent or distrusted, or everything is loaded: the caller then falls back to
        :meth:`ensure_loaded`). A plugin that fails to load here, or does not register ``name``, makes the manifest
        distrusted; the full discovery that follows reports any real error."""
        if self._complete:
            return
        with self._lock:
            if self._complete or self._loading == threading.get_ident() or name in self.registries[kind]._entries:
                return
            manifest = self._read_manifest()
            if manifest is None:
                return
            plugin, source = self._named_source(manifest, kind, name)
            if source is None:
                return
            if plugin in self._infos or not self._may_load(source):
                if plugin in self._infos:
                    self._distrust()
                return
            self._loading = threading.get_ident()
            try:
                self._load_one(plugin, source)
            except Exception:
                self._forget(plugin)
                self._distrust()
                return
            finally:
                self._loading = None
            if name not in self.registries[kind]._entries:
                self._distrust()

    def declares(self, kind: str, name: str) -> bool:
        """True when ``name`` of ``kind`` is registered, or the manifest names a plugin that registers it and would
        be loaded (not blocked; a builtin, or entry points autoloaded), without importing that plugin. False when it
        cannot tell (no trusted or declared manifest, discovery complete or under way); the caller then looks the
        name up, which loads what it must and reports a miss."""
        if self._complete:
            return False
        with self._lock:
            if self._complete or self._loading == threading.get_ident():
                return False
            if name in self.registries[kind]._entries:
                return True
            manifest = self._read_manifest()
            if manifest is None:
                return False
            _, source = self._named_source(manifest, kind, name)
            return source is not None and self._may_load(source)

    def names_fingerprint(self, kind: str) -> str | None:
        """A digest that two processes share when their lookups of ``kind`` would find the same names from the same
        plugins of the same installed versions: the environment's key (which installing, upgrading or removing any
        distribution changes), the manifest's names of ``kind``, the blocked plugins, autoloading and the builtins
        (the same whether the manifest was written from the declarations or after a full discovery). None when it
        cannot tell: no trusted or declared manifest, or a plugin registered in this process only. A plugin's source
        edited in place (an editable install) is not seen: only its distribution's metadata is."""
        with self._lock:
            if self._loading == threading.get_ident():
                return None
            manifest = self._read_manifest()
            if manifest is None:
                return None
            plugins = manifest['plugins']
            if any(entry.plugin not in plugins for entry in self.registries[kind]._entries.values()):
                return None
            text = json.dumps([self._manifest_key, sorted(manifest['names'].get(kind, {}).items()),
                               sorted(self.config.effective_blocked()), self.config.effective_autoload(),
                               sorted(map(list, self.config.builtins))])
        return hashlib.blake2s(text.encode('utf-8', 'surrogateescape'), digest_size=16).hexdigest()

    def load_kind(self, kind: str) -> bool:
        """Load every plugin the manifest says registers names of ``kind`` (for a listing of that registry, such as
        the index builders a directory's files are matched against). True when those are then all loaded and
        registered what the manifest says; False (the caller runs the full discovery) without a trusted manifest,
        or when a plugin fails to load or registers less than claimed (the manifest is then distrusted)."""
        if self._complete:
            return True
        with self._lock:
            if self._complete or self._loading == threading.get_ident():
                return self._complete
            manifest = self._read_manifest()
            if manifest is None:
                return False
            named = manifest['names'].get(kind, {})
            plugins = set(named.values()) | {plugin for plugin, source in manifest['plugins'].items()
                                             if kind in (source.get('declared') or {})}
            self._loading = threading.get_ident()
            try:
                for plugin in sorted(plugins - self.config.effective_blocked() - set(self._infos)):
                    source = manifest['plugins'].get(plugin)
                    if source is None or not self._may_load(source):
                        continue
                    try:
                        self._load_one(plugin, source)
                    except Exception:
                        self._forget(plugin)
                        self._distrust()
                        return False
            finally:
                self._loading = None
            registered = self.registries[kind]._entries
            if any(name not in registered for name, plugin in named.items() if plugin in self._infos):
                self._distrust()
                return False
            return True

    def _named_source(self, manifest: dict[str, Any], kind: str,
                      name: str) -> tuple[str | None, dict[str, Any] | None]:
        """``(plugin, its manifest source)`` the manifest names for ``name`` of ``kind``; the source is None when it
        names none, or a blocked plugin."""
        plugin = manifest['names'].get(kind, {}).get(name)
        source = manifest['plugins'].get(plugin) if plugin is not None else None
        if source is None or plugin in self.config.effective_blocked():
            return plugin, None
        return plugin, source

    def _may_load(self, source: dict[str, Any]) -> bool:
        """Whether a manifest source would be loaded: a builtin always, an entry point when autoloading."""
        return source.get('origin') == 'builtin' or self.config.effective_autoload()

    def _manager(self) -> pluggy.PluginManager:
        if self._pm is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            self._pm = pm
        return self._pm

    def _load_one(self, plugin: str, source: dict[str, str]) -> None:
        """Import one plugin named by the manifest, register it and run its hooks."""
        pm = self._manager()
        dist, version = source.get('distribution'), source.get('version')
        if dist is None and source.get('metadata'):
            dist, version = plugin_declarations.distribution_name_version(source['metadata'])
        info = PluginInfo(plugin, dist or ('streaming-core' if source.get('origin') == 'builtin' else 'unknown'),
                          version or '', source['module'], origin=source.get('origin', 'entry_point'))
        obj = _load_object(source['module'])
        self._register(pm, obj, info)
        self._infos[plugin] = info
        self._run_hooks(pm, info)
        self._check_declared(info, source.get('declared'))

    def _load_all(self) -> None:
        pm = self._manager()
        blocked = self.config.effective_blocked()
        autoload = self.config.effective_autoload()
        new: list[PluginInfo] = []
        core_version = ''
        for name, module_name in self.config.builtins:
            if name in blocked or name in self._infos:
                continue
            module = importlib.import_module(module_name)
            core_version = core_version or _version('streaming-core')
            info = PluginInfo(name, 'streaming-core', core_version, module_name, origin='builtin')
            self._register(pm, module, info)
            self._infos[name] = info
            new.append(info)
        if autoload:
            if self.config.effective_manifest() and not self._manifest_key:
                # Taken before the scan: a distribution installed meanwhile changes the key, so what this scan found
                # is never filed under the environment that has it (a later process there discovers for itself).
                self._manifest_key = plugin_manifest.environment_key()
            for ep in _entry_points():
                if ep.name in blocked or ep.name in self._infos:
                    continue
                dist = ep.dist.name if ep.dist is not None else '<unknown>'
                try:
                    plugin = ep.load()
                except Exception as err:
                    raise PluginLoadError(
                        f'Plugin {ep.name!r} (distribution {dist!r}, entry point {ep.value!r}) failed to import: '
                        f'{type(err).__name__}: {str(err).rstrip(".")}. Fix or uninstall it, or skip it with '
                        f'{BLOCK_ENV}={ep.name}.') from err
                info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist is not None else '', ep.value)
                self._register(pm, plugin, info)
                self._infos[ep.name] = info
                new.append(info)
        for info in new:
            self._run_hooks(pm, info)
        declared = plugin_declarations.declarations_of(
            [(i.name, i.module, i.origin == 'builtin' and BUILTINS.get(i.name) == i.module) for i in new])
        for info in new:
            self._check_declared(info, declared.get(info.name))
        self._complete = True
        if not blocked and autoload:
            # A manifest written with plugins blocked (or entry points skipped) would miss their names, and a later
            # process without the block would trust it: a name both a blocked plugin and another one register
            # would resolve to the other, silently. Only a discovery of everything installed writes it.
            self._write_manifest()

    # The manifest.
    def _read_manifest(self) -> dict[str, Any] | None:
        """The manifest file's record for this environment, else the plugins' static declarations in the same shape
        (:mod:`~streaming_core.machinery.declarations`), else None."""
        if self._manifest_state == 'unread':
            self._manifest_state = 'absent'
            if self.config.effective_manifest():
                self._manifest_key = self._manifest_key or plugin_manifest.environment_key()
                self._manifest = plugin_manifest.read_manifest(self._manifest_key, self.config.manifest_path)
                if self._manifest is not None:
                    self._manifest_state = 'trusted'
                else:
                    self._manifest = self._declared_manifest()
                    self._manifest_state = 'declared' if self._manifest is not None else 'absent'
                    if self._manifest is not None and not self.config.effective_blocked() and \
                            self.config.effective_autoload():
                        # The next process reads this file instead of every distribution's declarations. Each
                        # plugin's source keeps its declared names, so loading it still checks them.
                        plugins = {name: {**source, 'declared': {kind: sorted(names) for kind, names in
                                                                 source['declared'].items()}}
                                   for name, source in self._manifest['plugins'].items()}
                        plugin_manifest.write_manifest(self._manifest_key, plugins, self._manifest['names'],
                                                       self.config.manifest_path)
        return self._manifest if self._manifest_state in ('trusted', 'declared') else None

    def _declared_manifest(self) -> dict[str, Any] | None:
        """The builtins' and entry points' declarations in the manifest's shape (None unless every plugin declares)."""
        blocked = self.config.effective_blocked()
        builtins = [(n, m) for n, m in self.config.builtins if BUILTINS.get(n) == m and n not in blocked]
        return plugin_declarations.declared_manifest(builtins, self.config.effective_autoload(), blocked, KINDS)

    def _check_declared(self, info: PluginInfo, declared: Any) -> None:
        """Raise :class:`PluginLoadError` when the plugin registered other names than it declared."""
        if declared is not None:
            problem = plugin_declarations.mismatch(info.name, declared, info.registered)
            if problem is not None:
                raise PluginLoadError(f'{problem} ({_describe(info)})')

    def _distrust(self) -> None:
        self._manifest = None
        self._manifest_state = 'distrusted'

    def _write_manifest(self) -> None:
        """Record which plugin registered which names (builtins and entry points only), unless the manifest read
        for this environment already says exactly that."""
        if not self.config.effective_manifest():
            return
        plugins: dict[str, dict[str, str]] = {}
        names: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        for info in self._infos.values():
            if info.origin not in ('builtin', 'entry_point'):
                continue
            plugins[info.name] = {'module': info.module, 'origin': info.origin, 'distribution': info.distribution,
                                  'version': info.version}
        for kind, registry in self.registries.items():
            for entry_name, entry in list(registry._entries.items()):
                if entry.plugin in plugins:
                    names[kind][entry_name] = entry.plugin
        if self._manifest_state == 'unread':
            self._read_manifest()
        if self._manifest_state == 'trusted' and self._manifest is not None and \
                self._manifest['plugins'] == plugins and self._manifest['names'] == names:
            return
        key = self._manifest_key or plugin_manifest.environment_key()
        if plugin_manifest.write_manifest(key, plugins, names, self.config.manifest_path) is not None:
            self._manifest = {'plugins': plugins, 'names': names}
            self._manifest_key = key
            self._manifest_state = 'trusted'

    # Registration.
    def _register(self, pm: pluggy.PluginManager, plugin: object, info: PluginInfo) -> None:
        """Register one plugin with pluggy and check its hook implementations (signatures and names)."""
        try:
            pm.register(plugin, name=info.name)
        except pluggy.PluginValidationError as err:
            detail = '; '.join(line.strip() for line in str(err).splitlines() if line.strip())
            raise PluginLoadError(f'{_describe(info)} has an invalid hook implementation: {detail}. Fix or uninstall '
                                  f'it, or skip it with {BLOCK_ENV}={info.name}.') from err
        try:
            pm.check_pending()
        except pluggy.PluginValidationError as err:
            unknown = _unknown_hooks(pm, plugin) or ['?']
            pm.unregister(plugin)
            valid = sorted(KINDS.values())
            problems = []
            for name in unknown:
                close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
                hint = f' (did you mean {close[0]!r}?)' if close else ''
                problems.append(f'{name!r}{hint}')
            raise PluginLoadError(
                f'{_describe(info)} implements {", ".join(problems)}, which is not a {hookspecs.PROJECT} hook, so it '
                f'would never be called. The hooks are: {", ".join(valid)}. Rename the function, or skip the plugin '
                f'with {BLOCK_ENV}={info.name}.') from err

    def _run_hooks(self, pm: pluggy.PluginManager, info: PluginInfo) -> None:
        """Call one plugin's registration hooks through pluggy, with views that record that plugin's name."""
        plugin = pm.get_plugin(info.name)
        others = [other for other in pm.get_plugins() if other is not plugin]
        for kind, hook_name in KINDS.items():
            if not any(impl.plugin is plugin for impl in getattr(pm.hook, hook_name).get_hookimpls()):
                continue
            registry = self.registries[kind]
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

    def register_plugin(self, plugin: object, name: str, distribution: str = '<in-process>',
                        version: str = '') -> PluginInfo:
        """Register a plugin object in-process (tests, notebooks), through the same path as entry points.

        In-process plugins are not recorded in the manifest and not carried to spawned workers (register them there
        again, for example in a ``worker_init_fn``).

        Raises:
            ValueError: when a plugin named ``name`` is already registered.
            PluginLoadError: when the plugin implements an unknown hook or one of its hooks fails (nothing it
                registered is kept).
        """
        self.ensure_loaded()
        with self._lock:
            pm = self._manager()
            if name in self._infos:
                raise ValueError(f'A plugin named {name!r} is already registered.')
            already = next((info for key, info in self._infos.items()
                            if pm.get_plugin(key) is plugin), None)
            if already is not None:
                raise ValueError(
                    f'{getattr(plugin, "__name__", plugin)!r} is already registered as plugin {already.name!r} '
                    f'({already.distribution}, installed or registered earlier): it cannot be registered again as '
                    f'{name!r}. Test an installed plugin as it is, or block it for the test '
                    f'(fresh_plugin_manager(blocked=({already.name!r},))).')
            info = PluginInfo(name, distribution, version, getattr(plugin, '__name__', type(plugin).__name__),
                              origin='in-process')
            self._register(pm, plugin, info)
            try:
                self._run_hooks(pm, info)
            except Exception:
                self._forget(name)
                raise
            self._infos[name] = info
            return info

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin and every name it registered."""
        with self._lock:
            if self._pm is not None:
                self._forget(name)

    def _forget(self, name: str) -> None:
        for registry in self.registries.values():
            for entry_name in registry.names_from(name):
                registry.remove(entry_name)
        if self._pm is not None and self._pm.get_plugin(name) is not None:
            self._pm.unregister(name=name)
        self._infos.pop(name, None)

    def _clear(self) -> None:
        for registry in self.registries.values():
            registry.clear()
        self._pm = None
        self._infos = {}
        self._complete = False

    def reset(self) -> None:
        """Forget every registration and the manifest read; the next lookup loads again (used by test helpers)."""
        with self._lock:
            self._clear()
            self._manifest = None
            self._manifest_state = 'unread'
            self._manifest_key = ''

    def _after_fork_in_child(self) -> None:
        self._lock = threading.RLock()
        if self._loading not in (None, threading.get_ident()):
            self._loading = None
            self._clear()


def _describe(info: PluginInfo) -> str:
    return f'Plugin {info.name!r} (distribution {info.distribution!r}, {info.module!r})'


def _unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """The names of ``plugin``'s hook implementations that match no hook specification (and are not optional)."""
    names = []
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.has_spec():
            continue
        if any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()):
            names.append(caller.name)
    return sorted(names)


_default: dict[str, PluginHost | None] = {'host': None}
_default_lock = threading.Lock()
_current: contextvars.ContextVar[PluginHost | None] = contextvars.ContextVar('streaming_core_plugin_host',
                                                                             default=None)


def default_host() -> PluginHost:
    """The process-wide host, created on first use (creating it discovers nothing)."""
    host = _default['host']
    if host is None:
        with _default_lock:
            host = _default['host']
            if host is None:
                host = _default['host'] = PluginHost()
    return host


def set_default_host(host: PluginHost | None) -> PluginHost | None:
    """Replace the process-wide host (None: a fresh one is created on next use); return the previous one."""
    with _default_lock:
        previous, _default['host'] = _default['host'], host
    return previous


def current_host() -> PluginHost:
    """The host of the current context (:func:`using_host`), else the process default."""
    return _current.get() or default_host()


@contextlib.contextmanager
def using_host(host: PluginHost) -> Iterator[PluginHost]:
    """Make ``host`` the one every lookup of this context (thread or task) uses during the block.

    New threads start with the process default; pass ``host=`` explicitly there, or enter the block in the thread.
    """
    token = _current.set(host)
    try:
        yield host
    finally:
        _current.reset(token)


def get_registry(kind: str, host: PluginHost | None = None) -> Registry:
    """The registry of one kind in ``host`` (default: :func:`current_host`)."""
    return (host or current_host()).registry(kind)


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for host in list(_hosts):
        host._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
# Forked DataLoader workers inherit the parent's objects frozen, never walked by a collection (see forking.py).
plugin_forking.install()
fork_hazard.install()  # a warning where forked workers can hang at start (CPython gh-112275)
