"""Third-party ``streaming convert <name>`` subcommands: the ``converter`` kind of the plugin host.

A plugin adds converters like any other implementation, with the ``register_converters`` hook
(:func:`streaming_core.hookspecs.register_converters`, whose docstring has a complete example: a function adding
an ``argparse`` subparser, registered under the subcommand's name).

Converters are then listed by ``streaming plugins``, blocked with ``STREAMING_CORE_BLOCK_PLUGINS`` and checked like
every other kind (a misspelt hook is an error naming the plugin).

The earlier mechanism, an entry point per converter in the group ``streaming_core.converters`` whose value is the
``register(subparsers)`` function, still works and warns with a :class:`DeprecationWarning` naming the entry point
and the hook to use. A name registered through the hook wins over an entry point of the old group with the same name.

A converter that fails to load or to register never breaks the ``streaming`` command: it still appears under its
name, and running it reports the plugin, its distribution and the cause. The environment switches of plugin
discovery apply: ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD=1`` loads no converter entry point, and names in
``STREAMING_CORE_BLOCK_PLUGINS`` are skipped.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import logging
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from streaming_core.errors import PluginLoadError
from streaming_core.hookspecs import CONVERTER_GROUP

__all__ = ['CONVERTER_GROUP', 'ConverterInfo', 'converter_entry_points', 'register_converters']

logger = logging.getLogger('streaming_core')
_warned: set[str] = set()  # entry points of the deprecated group already warned about in this process


@dataclass
class ConverterInfo:
    """One discovered converter entry point and what became of it.

    Attributes:
        name: The entry point name.
        distribution: The distribution that declares it.
        version: That distribution's version.
        commands: The subcommands its ``register`` added.
        error: Why it could not be registered, or None.
    """

    name: str
    distribution: str
    version: str
    commands: list[str]
    error: str | None = None


def converter_entry_points() -> list[md.EntryPoint]:
    """The converter entry points that are installed and not blocked, sorted by name (none when autoload is off)."""
    from streaming_core.machinery.host import BLOCK_ENV, DISABLE_ENV
    if os.environ.get(DISABLE_ENV, '').strip().lower() in ('1', 'true', 'yes'):
        return []
    blocked = {name.strip() for name in os.environ.get(BLOCK_ENV, '').split(',') if name.strip()}
    seen: dict[str, md.EntryPoint] = {}
    for ep in md.entry_points(group=CONVERTER_GROUP):
        if ep.name not in blocked and ep.name not in seen:
            seen[ep.name] = ep
    return [seen[name] for name in sorted(seen)]


def _dist(ep: md.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, 'dist', None)
    if dist is None:
        return '<unknown>', ''
    return dist.metadata['Name'] or '<unknown>', dist.version or ''


def _broken(subparsers: Any, name: str, message: str) -> None:
    """A placeholder subcommand that reports why the converter could not be loaded."""
    def run(args: argparse.Namespace) -> int:
        raise PluginLoadError(message)
    parser = subparsers.add_parser(name, help='(failed to load; run it to see why)', add_help=True,
                                   description=message)
    parser.add_argument('rest', nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _missing_run(name: str, plugin: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        raise PluginLoadError(f'Converter {name!r} (entry point {plugin!r}) did not set a handler: its register() '
                              f'must call parser.set_defaults(run=handler).')
    return run


class _Guarded:
    """The subparsers action as a plugin's ``register`` sees it: adding a built-in converter's name is refused with a
    clear reason (argparse would only say "conflicting subparser")."""

    def __init__(self, subparsers: Any, reserved: set[str]) -> None:
        self._subparsers = subparsers
        self._reserved = reserved

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        for taken in (name, *kwargs.get('aliases', ())):
            if taken in self._reserved:
                raise ValueError(f'it tried to add the subcommand {taken!r}, which is a built-in converter')
            if taken in self._subparsers.choices:
                raise ValueError(f'it tried to add the subcommand {taken!r}, which another converter already added')
        return self._subparsers.add_parser(name, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._subparsers, name)


def _forget(subparsers: Any, names: set[str]) -> None:
    """Drop subcommands a failed ``register`` half-added (from the choices and the help listing)."""
    for name in names:
        subparsers.choices.pop(name, None)
    actions = getattr(subparsers, '_choices_actions', None)
    if isinstance(actions, list):
        actions[:] = [action for action in actions if getattr(action, 'dest', None) not in names]


def _add(subparsers: Any, reserved: set[str], name: str, where: str, block_name: str,
         get_register: Callable[[], Any]) -> tuple[list[str], str | None]:
    """Call one converter's ``register(subparsers)``; return the subcommands it added, or the error message."""
    before = set(subparsers.choices)
    try:
        if name in reserved:
            raise ValueError(f'the name {name!r} is a built-in converter')
        register = get_register()
        if not callable(register):
            raise TypeError(f'{register!r} is a {type(register).__name__}, not a register(subparsers) function')
        register(_Guarded(subparsers, reserved))
        added = sorted(set(subparsers.choices) - before)
        if not added:
            raise ValueError('its register(subparsers) added no subcommand')
    except Exception as err:  # never break the CLI for one bad plugin
        _forget(subparsers, set(subparsers.choices) - before)
        message = (f'{where} failed to load: {type(err).__name__}: {str(err).rstrip(".")}. Fix or reinstall it, or '
                   f'skip it with STREAMING_CORE_BLOCK_PLUGINS={block_name}.')
        if name not in subparsers.choices:
            _broken(subparsers, name, message)
        return [], message
    for command in added:
        parser = subparsers.choices[command]
        if parser.get_default('run') is None:
            parser.set_defaults(run=_missing_run(command, name))
    return added, None


def _hook_converters() -> list[tuple[str, Any, str, str, str]]:
    """``(name, register, plugin, distribution, version)`` of every converter registered through the hook."""
    from streaming_core.machinery.discovery import current_host
    host = current_host()
    try:
        entries = list(host.registry('converter').entries())
        infos = {info.name: info for info in host.plugin_infos()}
    except Exception as err:  # a broken plugin is reported by every lookup; the CLI itself keeps working
        logger.warning('Converters registered by plugins are unavailable: %s: %s', type(err).__name__, err)
        return []
    result = []
    for entry in entries:
        info = infos.get(entry.plugin)
        result.append((entry.name, entry.obj, entry.plugin, info.distribution if info else '<unknown>',
                       info.version if info else ''))
    return result


def register_converters(subparsers: Any, reserved: set[str]) -> list[ConverterInfo]:
    """Add every converter: those registered through the ``register_converters`` hook, then (deprecated) those of
    the entry-point group ``streaming_core.converters``.

    Args:
        subparsers: The ``streaming convert`` subparsers action.
        reserved: Subcommand names already taken (the built-in converters); a converter that would take one
            is reported instead of registered.

    Returns:
        One :class:`ConverterInfo` per converter.
    """
    infos = []
    hooked = set()
    for name, register, plugin, dist, version in _hook_converters():
        hooked.add(name)
        where = f'Converter {name!r} (plugin {plugin!r}, distribution {dist!r})'
        added, error = _add(subparsers, reserved, name, where, plugin, lambda register=register: register)
        infos.append(ConverterInfo(name, dist, version, added, error))
    for ep in converter_entry_points():
        if ep.name in hooked:
            continue
        dist, version = _dist(ep)
        if ep.name not in _warned:
            _warned.add(ep.name)
            warnings.warn(f'Converter entry point {ep.name!r} of the distribution {dist!r} uses the deprecated group '
                          f'"{CONVERTER_GROUP}"; register it with the register_converters hook of a streaming_core '
                          f'plugin instead (see docs/plugins/api.md).', DeprecationWarning, stacklevel=2)
        where = f'Converter plugin {ep.name!r} (distribution {dist!r}, entry point {ep.value!r})'
        added, error = _add(subparsers, reserved, ep.name, where, ep.name, ep.load)
        infos.append(ConverterInfo(ep.name, dist, version, added, error))
    return infos
