"""Third-party ``streaming convert <name>`` subcommands, discovered through entry points.

A distribution adds a converter by declaring, in its ``pyproject.toml``::

    [project.entry-points."streaming_core.converters"]
    cifar10 = "streaming_datasets.cifar10:register"

where ``register(subparsers)`` adds exactly one subparser (usually named like the entry point) and sets its
handler with ``parser.set_defaults(run=handler)``; ``handler(args)`` returns the exit code (or None for 0)::

    def register(subparsers):
        parser = subparsers.add_parser('cifar10', help='CIFAR-10 from its python tarball')
        parser.add_argument('src')
        parser.add_argument('out')
        parser.set_defaults(run=lambda args: convert_cifar10(args.src, args.out))

A converter that fails to load or to register never breaks the ``streaming`` command: it still appears under its
entry point name, and running it reports the plugin, its distribution and the cause. The environment switches of
plugin discovery apply: ``STREAMING_CORE_DISABLE_PLUGIN_AUTOLOAD=1`` loads no converter entry point, and names in
``STREAMING_CORE_BLOCK_PLUGINS`` are skipped.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
from dataclasses import dataclass
from typing import Any

from streaming_core.errors import PluginLoadError

__all__ = ['CONVERTER_GROUP', 'ConverterInfo', 'converter_entry_points', 'register_converters']

#: The entry point group of third-party converters.
CONVERTER_GROUP = 'streaming_core.converters'


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
    from streaming_core.plugins import BLOCK_ENV, DISABLE_ENV
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


def register_converters(subparsers: Any, reserved: set[str]) -> list[ConverterInfo]:
    """Call every converter entry point's ``register(subparsers)``.

    Args:
        subparsers: The ``streaming convert`` subparsers action.
        reserved: Subcommand names already taken (the built-in converters); an entry point that would take one
            is reported instead of registered.

    Returns:
        One :class:`ConverterInfo` per entry point.
    """
    infos = []
    for ep in converter_entry_points():
        dist, version = _dist(ep)
        where = f'Converter plugin {ep.name!r} (distribution {dist!r}, entry point {ep.value!r})'
        before = set(subparsers.choices)
        try:
            if ep.name in reserved:
                raise ValueError(f'the name {ep.name!r} is a built-in converter')
            register = ep.load()
            if not callable(register):
                raise TypeError(f'{ep.value} is a {type(register).__name__}, not a register(subparsers) function')
            register(_Guarded(subparsers, reserved))
            added = sorted(set(subparsers.choices) - before)
            if not added:
                raise ValueError('its register(subparsers) added no subcommand')
        except Exception as err:  # never break the CLI for one bad plugin
            _forget(subparsers, set(subparsers.choices) - before)
            message = (f'{where} failed to load: {type(err).__name__}: {err}. Fix or reinstall it, or skip it with '
                       f'STREAMING_CORE_BLOCK_PLUGINS={ep.name}.')
            if ep.name not in subparsers.choices:
                _broken(subparsers, ep.name, message)
            infos.append(ConverterInfo(ep.name, dist, version, [], message))
            continue
        for name in added:
            parser = subparsers.choices[name]
            if parser.get_default('run') is None:
                parser.set_defaults(run=_missing_run(name, ep.name))
        infos.append(ConverterInfo(ep.name, dist, version, added))
    return infos
