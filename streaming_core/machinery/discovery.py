"""Plugin discovery through the process's plugin host: the stable module-level API.

The machinery lives in :mod:`streaming_core.machinery.host` (:class:`~streaming_core.machinery.host.PluginHost`: the
pluggy manager, the registries and the plugin infos, loaded lazily by manifest, thread-safe, injectable). The functions
here act on the current host (:func:`~streaming_core.machinery.host.current_host`: the one made current with
:func:`~streaming_core.machinery.host.using_host`, else the process default), so existing callers keep working.

Discovery is lazy: nothing happens at ``import streaming_core``. A lookup of a name imports the plugin that registers
it (the manifest says which); listing names runs the full discovery of the builtins plus every entry point in the
group ``streaming_core``.

Environment switches:

* ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD=1``: load only the builtins (no entry points).
* ``STREAMING_CORE_BLOCK_PLUGINS=a,b``: skip the named entry points (or builtins).
* ``STREAMING_CORE_PLUGIN_MANIFEST=0``: ignore the plugin manifest (every first lookup runs the full discovery).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

import pluggy

from streaming_core.errors import PluginLoadError
from streaming_core.hookspecs import ENTRY_POINT_GROUP
from streaming_core.machinery.host import (
    BLOCK_ENV,
    BUILTINS,
    DISABLE_ENV,
    MANIFEST_ENV,
    HostConfig,
    PluginHost,
    PluginInfo,
    current_host,
    default_host,
    set_default_host,
    using_host,
)
from streaming_core.machinery.name_registry import Registry

__all__ = ['BUILTINS', 'PluginInfo', 'PluginHost', 'HostConfig', 'ensure_loaded', 'reset', 'plugin_infos',
           'register_plugin', 'unregister_plugin', 'get_plugin_manager', 'registries', 'get_registry',
           'ENTRY_POINT_GROUP', 'DISABLE_ENV', 'BLOCK_ENV', 'MANIFEST_ENV', 'default_host', 'set_default_host',
           'using_host', 'current_host', 'PluginLoadError']


def get_plugin_manager() -> pluggy.PluginManager:
    """The current host's plugin manager, running the full discovery first if needed."""
    return current_host().plugin_manager


def ensure_loaded() -> None:
    """Load every plugin into the current host (once; thread-safe; re-entrant from a hook)."""
    current_host().ensure_loaded()


def plugin_infos() -> list[PluginInfo]:
    """Every plugin of the current host with its distribution, version and the names it registered per kind."""
    return current_host().plugin_infos()


def register_plugin(plugin: ModuleType | object, name: str, distribution: str = '<in-process>',
                    version: str = '') -> PluginInfo:
    """Register a plugin object in-process (tests, notebooks), through the same path as entry points.

    Raises:
        ValueError: when a plugin named ``name`` is already registered.
        PluginLoadError: when the plugin implements an unknown hook or one of its hooks fails (nothing it
            registered is kept).
    """
    return current_host().register_plugin(plugin, name, distribution, version)


def unregister_plugin(name: str) -> None:
    """Remove an in-process plugin and every name it registered."""
    current_host().unregister_plugin(name)


def reset() -> None:
    """Forget every registration of the current host; the next lookup discovers again (used by test helpers)."""
    current_host().reset()


def registries() -> dict[str, Registry]:
    """The current host's registries, one per kind (discovery still lazy: it runs on lookups)."""
    return current_host().registries


def get_registry(kind: str, host: PluginHost | None = None) -> Registry:
    """The registry of one kind (``'codec'``, ``'compressor'``, ``'hash'``, ``'storage'``, ...) in ``host``
    (default: the current host)."""
    return (host or current_host()).registry(kind)


class _StateView(Mapping[str, Any]):
    """Read-only view of the default host's loading state (``pm`` is None until something was loaded), kept for
    callers of earlier versions that inspected ``plugins._state``."""

    def __getitem__(self, key: str) -> Any:
        host = default_host()
        values = {'pm': host._pm, 'infos': host._infos, 'loading': host._loading, 'complete': host.complete}
        return values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(('pm', 'infos', 'loading', 'complete'))

    def __len__(self) -> int:
        return 4


_state = _StateView()
