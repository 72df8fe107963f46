"""Name registries: the :class:`Registry` of one kind of plugin implementation, and the catalogue of kinds.

A :class:`Registry` maps a name string (``'zstd'``, ``'s3'``, ``'py1e'``) to the object a plugin registered
for it, remembers which plugin registered it, and explains a miss: the names that are installed and, for a
first-party name whose distribution is absent, the ``pip install`` that provides it.

This module knows nothing of discovery: a registry is given a ``loader`` (load everything) and optionally a
``name_loader`` (load what provides one name) to call before lookups. The registries filled by plugin discovery
belong to a :class:`~streaming_core.machinery.host.PluginHost`; the process-wide ones are reached through
:func:`streaming_core.machinery.lookup.get_registry`. The kinds are derived from the hook specifications
(:data:`streaming_core.hookspecs.KINDS`).
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from streaming_core.errors import DuplicateNameError, UnknownNameError
from streaming_core.hookspecs import KIND_WORDS, KINDS

__all__ = ['KINDS', 'INSTALL_HINTS', 'Entry', 'Registry', 'RegistryView']

_MDS_CODECS = ('bytes', 'str', 'int', 'ndarray', 'uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32',
               'int64', 'float16', 'float32', 'float64', 'str_int', 'str_float', 'str_decimal', 'pil', 'jpeg',
               'jpeg_array', 'jpegarray', 'png', 'list[pil]', 'list[jpeg]', 'list[png]', 'pkl', 'json')

#: First-party names and the distribution that registers each (checked by a meta-test).
INSTALL_HINTS: dict[str, dict[str, str]] = {
    'codec': {name: 'streaming-mds' for name in _MDS_CODECS},
    'compressor': {'zstd': 'streaming-compression', 'br': 'streaming-compression',
                   'snappy': 'streaming-compression', 'lz4': 'streaming-compression'},
    'hash': {},
    'storage': {'s3': 'streaming-s3', 'gs': 'streaming-gcs', 'oci': 'streaming-oci', 'azure': 'streaming-azure',
                'azure-dl': 'streaming-azure', 'dbfs': 'streaming-databricks', 'sftp': 'streaming-sftp',
                'hf': 'streaming-hf'},
    'format': {'mds': 'streaming-mds', 'json': 'streaming-jsonl', 'csv': 'streaming-csv', 'tsv': 'streaming-csv',
               'xsv': 'streaming-csv', 'parquet': 'streaming-parquet', 'webdataset': 'streaming-webdataset',
               'litdata': 'streaming-litdata'},
    'shuffle': {'py1e': 'streaming-py1e', 'py1b': 'streaming-py1e', 'py1br': 'streaming-py1e',
                'py1s': 'streaming-py1e', 'py2s': 'streaming-py1e', 'py1n': 'streaming-py1e'},
    'batching': {'stratified': 'streaming-stratified', 'per_stream': 'streaming-stratified',
                 'device_per_stream': 'streaming-stratified'},
    'converter': {name: 'streaming-datasets' for name in ('cifar10', 'imagenet', 'coco', 'ade20k', 'c4', 'pile',
                                                          'enwiki', 'laion400m', 'webvid', 'tokens', 'pack-tokens')}
                 | {'webdataset': 'streaming-webdataset', 'litdata': 'streaming-litdata'},
    'index_builder': {'parquet': 'streaming-parquet', 'webdataset': 'streaming-webdataset',
                      'litdata': 'streaming-litdata'},
    'stream': {},
}

_KIND_WORDS = KIND_WORDS


@dataclass(frozen=True)
class Entry:
    """One registered name: the object and the plugin that registered it."""

    name: str
    obj: Any
    plugin: str


class Registry:
    """The names registered for one kind, filled by plugin discovery on first lookup.

    Args:
        kind: One of :data:`KINDS`.
        loader: Called before a lookup that needs every name (listing, a miss) to run plugin discovery if it has
            not run yet. It must be cheap once discovery is done, thread-safe, and return only when discovery is
            complete (except when called again by the discovering thread itself, from a hook).
        name_loader: Called with a name that is not registered yet (or while ``busy``), before falling back to
            ``loader``: it loads only the plugin that provides that name (lazy loading by manifest). Same rules as
            ``loader``.
        busy: True while another thread loads plugins into this registry: a lookup then goes through
            ``name_loader`` (which waits) even for a name already registered.
        kind_loader: Called before :meth:`entries` to load only the plugins that register names of this kind; True
            when that is all of them, else ``loader`` runs. Same rules as ``loader``.
        name_checker: Called by :meth:`check` with a name that is not registered yet: True when the plugin manifest
            says an installed plugin registers it (without importing that plugin), False when it cannot tell.
        fingerprinter: Called by :meth:`fingerprint` (see there).
    """

    def __init__(self, kind: str, loader: Callable[[], None] | None = None,
                 name_loader: Callable[[str], None] | None = None, busy: Callable[[], bool] | None = None,
                 kind_loader: Callable[[], bool] | None = None,
                 name_checker: Callable[[str], bool] | None = None,
                 fingerprinter: Callable[[], str | None] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f'Unknown registry kind {kind!r}; expected one of {sorted(KINDS)}.')
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._loader = loader
        self._name_loader = name_loader
        self._kind_loader = kind_loader
        self._name_checker = name_checker
        self._fingerprinter = fingerprinter
        self._busy = busy
        self._lock = threading.RLock()
        #: Incremented on every change, so caches of resolved names (codec strings...) can key on it.
        self.generation = 0

    def ensure_loaded(self) -> None:
        """Run plugin discovery if it has not run yet."""
        loader = self._loader
        if loader is not None:
            loader()

    _ensure_loaded = ensure_loaded

    def _find(self, name: object) -> Entry | None:
        """The entry of ``name``, loading the plugin that provides it, then everything, when it is not there yet."""
        entry = self._entries.get(name)  # type: ignore[call-overload]
        if entry is not None and (self._busy is None or not self._busy()):
            return entry
        if self._name_loader is not None and isinstance(name, str):
            self._name_loader(name)
            entry = self._entries.get(name)
            if entry is not None:
                return entry
        self._ensure_loaded()
        return self._entries.get(name)  # type: ignore[call-overload]

    def add(self, name: str, obj: Any, *, plugin: str = '<unknown>', override: bool = False) -> None:
        """Register ``obj`` under ``name``.

        Args:
            name: The name users pass in constructors. Must be a non-empty string.
            obj: The implementation (see :mod:`streaming_core.machinery.protocols` for what each kind expects).
            plugin: The registering plugin's name, reported in errors and by ``streaming plugins``.
            override: Replace an existing registration instead of raising :class:`DuplicateNameError`.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f'A {self.kind} name must be a non-empty string, got {name!r} from plugin {plugin!r}.')
        with self._lock:
            old = self._entries.get(name)
            if old is not None and not override and old.plugin != plugin:
                raise DuplicateNameError(
                    f'{_KIND_WORDS[self.kind].capitalize()} {name!r} is registered by two plugins: {old.plugin!r} '
                    f'and {plugin!r}. Uninstall one, block one with STREAMING_CORE_BLOCK_PLUGINS, or register with '
                    f'override=True.')
            self._entries[name] = Entry(name, obj, plugin)
            self.generation += 1

    def remove(self, name: str) -> None:
        """Remove a registration (used by test helpers)."""
        with self._lock:
            self._entries.pop(name, None)
            self.generation += 1

    def clear(self) -> None:
        """Remove every registration (discovery runs again on the next lookup)."""
        with self._lock:
            self._entries.clear()
            self.generation += 1

    def get(self, name: str) -> Any:
        """Return the object registered under ``name`` or raise :class:`UnknownNameError` with a hint."""
        entry = self._find(name)
        if entry is None:
            raise UnknownNameError(self.describe_miss(name))
        return entry.obj

    def check(self, name: str) -> None:
        """Raise :class:`UnknownNameError` (as :meth:`get`) unless ``name`` is registered or the plugin manifest
        says which installed plugin registers it; that plugin is then imported on first use, not here. For argument
        checks at construction, where importing a plugin the run may never use would cost start-up time."""
        if name in self._entries:
            return
        if self._name_checker is not None and isinstance(name, str) and self._name_checker(name):
            return
        self.get(name)

    def fingerprint(self) -> str | None:
        """A digest equal in two processes whose lookups of this kind find the same names from the same plugins of
        the same installed versions, so a result computed from every entry (such as which index builder claims a
        directory's files) can be kept between processes under it; None when that cannot be told (then compute)."""
        return self._fingerprinter() if self._fingerprinter is not None else None

    def __contains__(self, name: object) -> bool:
        return self._find(name) is not None

    def names(self) -> list[str]:
        """The registered names, sorted."""
        self._ensure_loaded()
        return sorted(self._entries)

    def origin(self, name: str) -> str:
        """The plugin that registered ``name``."""
        entry = self._find(name)
        if entry is None:
            raise UnknownNameError(self.describe_miss(name))
        return entry.plugin

    def names_from(self, plugin: str) -> list[str]:
        """The names ``plugin`` registered, sorted (no discovery: used while discovery runs)."""
        with self._lock:
            return sorted(name for name, entry in self._entries.items() if entry.plugin == plugin)

    def entries(self) -> Iterator[Entry]:
        """All entries, sorted by name (loading only the plugins of this kind when the manifest says which)."""
        if self._kind_loader is None or not self._kind_loader():
            self._ensure_loaded()
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def describe_miss(self, name: str) -> str:
        """The message for an unknown ``name``: installed names, an install hint, a close match."""
        self._ensure_loaded()
        word = _KIND_WORDS[self.kind]
        installed = sorted(self._entries)
        lines = [f'Unknown {word} {name!r}.']
        dist = INSTALL_HINTS[self.kind].get(name)
        if dist is not None:
            lines.append(f'{word.capitalize()} {name!r} is provided by the distribution {dist!r}, which is not '
                         f'installed (or is blocked): pip install {dist}')
        else:
            close = difflib.get_close_matches(str(name), installed, n=1)
            if close:
                lines.append(f'Did you mean {close[0]!r}?')
        lines.append(f'Installed {word} names: {", ".join(installed) if installed else "(none)"}.')
        return '\n'.join(lines)


class RegistryView:
    """What a registration hook receives: ``add`` records the calling plugin's name automatically."""

    def __init__(self, registry: Registry, plugin: str) -> None:
        self._registry = registry
        self.plugin = plugin
        self.kind = registry.kind

    def add(self, name: str, obj: Any, *, override: bool = False) -> None:
        """Register ``obj`` under ``name`` for this plugin (see :meth:`Registry.add`)."""
        self._registry.add(name, obj, plugin=self.plugin, override=override)
