"""What a plugin host is built from: :class:`HostConfig` (the builtins, the environment switches, the manifest),
and what it reports per plugin, :class:`PluginInfo`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ['BUILTINS', 'DISABLE_ENV', 'BLOCK_ENV', 'MANIFEST_ENV', 'HostConfig', 'PluginInfo']

DISABLE_ENV = 'STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD'
BLOCK_ENV = 'STREAMING_CORE_BLOCK_PLUGINS'
#: Set to 0 to ignore the plugin manifest (every first lookup then runs the full discovery).
MANIFEST_ENV = 'STREAMING_CORE_PLUGIN_MANIFEST'

#: Builtin plugin modules, registered exactly like entry points.
BUILTINS: dict[str, str] = {
    'builtin.local': 'streaming_core.builtin.local',
    'builtin.http': 'streaming_core.builtin.http',
    'builtin.compression': 'streaming_core.builtin.compression',
    'builtin.hashes': 'streaming_core.builtin.hashes',
    'builtin.naive': 'streaming_core.builtin.naive',
    'builtin.random': 'streaming_core.builtin.random_batching',
    'builtin.streams': 'streaming_core.builtin.streams',
}


def _truthy(value: str | None) -> bool:
    return (value or '').strip().lower() not in ('', '0', 'false', 'no', 'off')


@dataclass(frozen=True)
class HostConfig:
    """What a host is built from (and all a pickled host carries).

    Attributes:
        builtins: ``(plugin name, module)`` of the builtin plugins.
        autoload: Load entry points; None reads ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD`` at each discovery.
        blocked: Plugin names to skip; None reads ``STREAMING_CORE_BLOCK_PLUGINS`` at each discovery.
        manifest: Use (and write) the plugin manifest for lazy loading; None reads ``STREAMING_CORE_PLUGIN_MANIFEST``
            (default on).
        manifest_path: Where the manifest lives (default :func:`~streaming_core.machinery.manifest.manifest_path`).
    """

    builtins: tuple[tuple[str, str], ...] = tuple(BUILTINS.items())
    autoload: bool | None = None
    blocked: tuple[str, ...] | None = None
    manifest: bool | None = None
    manifest_path: str | None = None

    def effective_autoload(self) -> bool:
        """Whether entry points are loaded now."""
        return self.autoload if self.autoload is not None else not _truthy(os.environ.get(DISABLE_ENV))

    def effective_blocked(self) -> set[str]:
        """The plugin names skipped now."""
        if self.blocked is not None:
            return set(self.blocked)
        return {name.strip() for name in os.environ.get(BLOCK_ENV, '').split(',') if name.strip()}

    def effective_manifest(self) -> bool:
        """Whether the manifest is used now."""
        if self.manifest is not None:
            return self.manifest
        return os.environ.get(MANIFEST_ENV, '1').strip().lower() not in ('0', 'false', 'no', 'off')


@dataclass
class PluginInfo:
    """What ``streaming plugins`` reports for one plugin.

    Attributes:
        name: The plugin (entry point) name.
        distribution: The distribution that provides it.
        version: That distribution's version.
        module: The module (or entry point value) it was loaded from.
        registered: ``{kind: [names]}`` it registered.
        origin: ``'builtin'``, ``'entry_point'`` or ``'in-process'``.
    """

    name: str
    distribution: str
    version: str
    module: str
    registered: dict[str, list[str]] = field(default_factory=dict)
    origin: str = 'entry_point'
