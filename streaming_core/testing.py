"""Test helpers for plugin authors (and for this project's own tests).

Use them as a pytest plugin (``pytest_plugins = ['streaming_core.testing']``) for the fixtures, or directly::

    from streaming_core.testing import registered_plugin

    def test_my_codec():
        with registered_plugin(my_plugin_module, name='my-plugin'):
            writer = MDSWriter(out=tmp, columns={'x': 'my_codec'})
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest

from streaming_core.machinery import discovery as plugins

__all__ = ['registered_plugin', 'fresh_plugin_manager', 'plugin_registrar', 'fresh_plugins']


@contextlib.contextmanager
def registered_plugin(plugin: ModuleType | object, name: str = 'test-plugin') -> Iterator[plugins.PluginInfo]:
    """Register ``plugin`` (a module or object with hook implementations) for the duration of the block."""
    info = plugins.register_plugin(plugin, name)
    try:
        yield info
    finally:
        plugins.unregister_plugin(name)


@contextlib.contextmanager
def fresh_plugin_manager(*, autoload: bool = True, blocked: tuple[str, ...] = ()) -> Iterator[None]:
    """Run the block with a freshly discovered plugin set (optionally without entry points, or with some blocked),
    then restore normal discovery."""
    saved = {key: os.environ.get(key) for key in (plugins.DISABLE_ENV, plugins.BLOCK_ENV)}
    try:
        if autoload:
            os.environ.pop(plugins.DISABLE_ENV, None)
        else:
            os.environ[plugins.DISABLE_ENV] = '1'
        if blocked:
            os.environ[plugins.BLOCK_ENV] = ','.join(blocked)
        else:
            os.environ.pop(plugins.BLOCK_ENV, None)
        plugins.reset()
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        plugins.reset()


@pytest.fixture
def fresh_plugins() -> Iterator[Callable[..., Any]]:
    """A fixture returning :func:`fresh_plugin_manager` (discovery is restored after the test)."""
    yield fresh_plugin_manager
    plugins.reset()


@pytest.fixture
def plugin_registrar() -> Iterator[Callable[..., plugins.PluginInfo]]:
    """A fixture: ``plugin_registrar(plugin, name)`` registers an in-process plugin until the test ends."""
    names: list[str] = []

    def register(plugin: ModuleType | object, name: str = 'test-plugin') -> plugins.PluginInfo:
        info = plugins.register_plugin(plugin, name)
        names.append(name)
        return info

    yield register
    for name in reversed(names):
        plugins.unregister_plugin(name)
