"""Name registries: one per kind of plugin implementation, filled by plugin discovery on first lookup.

``get_registry('codec').get('int')`` returns what a plugin registered under that name, or raises
:class:`~streaming_core.errors.UnknownNameError` listing the installed names and, for a first-party name whose
distribution is absent, the ``pip install`` that provides it. ``get_registry(kind, host=...)`` looks in another
:class:`~streaming_core.machinery.host.PluginHost` than the current one.

The :class:`Registry` class and the catalogue of kinds are defined in :mod:`streaming_core.machinery.name_registry`; the
registries belong to a plugin host (:mod:`streaming_core.machinery.host`), which fills them. This module is the stable
import path for both.
"""

from __future__ import annotations

from streaming_core.machinery.discovery import get_registry, registries
from streaming_core.machinery.name_registry import INSTALL_HINTS, KINDS, Entry, Registry, RegistryView

__all__ = ['KINDS', 'INSTALL_HINTS', 'Entry', 'Registry', 'RegistryView', 'registries', 'get_registry']
