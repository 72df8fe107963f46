"""The reference's registries (``streaming.base.registry_utils``) over streaming-core's name registries.

A :class:`TypedRegistry` maps names to objects (stream classes for :data:`streaming.base.stream.streams_registry`).
Names come from three places, looked up in this order:

1. ``register(name, func=...)`` calls in this process;
2. streaming-core's plugin registry of the same kind, when the core defines it (so a plugin distribution can
   register through its ``streaming_core`` entry point like any other plugin);
3. entry points in the reference's group (``'_'.join(namespace)``, ``streaming_streams_registry`` for streams), so
   packages written for the reference keep registering the way they did.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import importlib.util
import inspect
import os
import threading
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Callable, Generic, TypeVar

from streaming_core.errors import UnknownMethodError

__all__ = ['RegistryError', 'TypedRegistry', 'create_registry', 'construct_from_registry', 'import_file',
           'save_registry']

T = TypeVar('T')


class RegistryError(UnknownMethodError):
    """A name is not registered (``ValueError``, like the reference's ``catalogue.RegistryError``)."""


class TypedRegistry(Generic[T]):
    """Names to objects of one type, filled by ``register`` calls, core plugins and entry points.

    Args:
        namespace: The registry's name parts (``('streaming', 'streams_registry')``); joined with ``_`` they name the
            entry-point group.
        generic_type: What registered objects are (``type[Stream]``); ``register_class`` checks it.
        entry_points: Whether to look names up in the entry-point group.
        description: What the registry holds (shown in errors).
        core_kind: The streaming-core registry kind consulted as well, if the core defines it.
    """

    def __init__(self, *namespace: str, generic_type: Any = object, entry_points: bool = False,
                 description: str = '', core_kind: str | None = None) -> None:
        self.namespace = tuple(namespace)
        self.entry_points = entry_points
        self.entry_point_group = '_'.join(namespace)
        self.generic_type = generic_type
        self.description = description
        self.core_kind = core_kind
        self._items: dict[str, T] = {}
        self._lock = threading.RLock()

    # Registration.
    def register(self, name: str, *, func: T | None = None) -> Any:
        """Register ``func`` under ``name`` and return it; without ``func``, return a decorator that does so."""
        if not isinstance(name, str) or not name:
            raise ValueError(f'A registry name must be a non-empty string, got {name!r}.')
        if func is None:
            def decorator(obj: T) -> T:
                self.register(name, func=obj)
                return obj
            return decorator
        with self._lock:
            self._items[name] = func
        self._add_to_core(name, func)
        return func

    __call__ = register

    def register_class(self, name: str, *, func: Any = None) -> Any:
        """Like :meth:`register`, checking that ``func`` is a subclass of the registry's class."""
        base = _class_of(self.generic_type)
        if func is None:
            def decorator(obj: Any) -> Any:
                return self.register_class(name, func=obj)
            return decorator
        if base is not None and not (inspect.isclass(func) and issubclass(func, base)):
            raise TypeError(f'Expected {func!r} to be a subclass of {base.__name__} to register it in '
                            f'{".".join(self.namespace)} as {name!r}.')
        return self.register(name, func=func)

    @property
    def plugin_name(self) -> str:
        """The plugin name this registry's registrations carry in streaming-core's registry."""
        return f'<{".".join(self.namespace)}>'

    def _add_to_core(self, name: str, func: Any) -> None:
        registry = _core_registry(self.core_kind)
        if registry is not None and not (name in registry and registry.get(name) is func):  # a builtin stays its own
            registry.add(name, func, plugin=self.plugin_name, override=True)

    def in_core(self, name: str, obj: Any) -> bool:
        """Whether streaming-core's registry of this kind holds ``obj`` under ``name`` (the core then builds it)."""
        registry = _core_registry(self.core_kind)
        if registry is None or name not in registry:
            return False
        return registry.get(name) is obj

    # Lookups.
    def get(self, name: str) -> T:
        """The object registered under ``name``, or :class:`RegistryError` listing the registered names."""
        with self._lock:
            if name in self._items:
                return self._items[name]
        registry = _core_registry(self.core_kind)
        if registry is not None and name in registry:
            return registry.get(name)
        if self.entry_points:
            found = self.get_entry_point(name)
            if found is not None:
                return found
        names = ', '.join(sorted(self.get_all()))
        raise RegistryError(f'Cannot find {name!r} in registry {".".join(self.namespace)}'
                            f'{" (" + self.description + ")" if self.description else ""}. Registered names: '
                            f'{names}. Register it with {".".join(self.namespace[1:]) or "registry"}.register('
                            f'{name!r}, func=...) or through the entry-point group {self.entry_point_group!r}.')

    def has(self, name: str) -> bool:
        """Whether ``name`` is registered (in any of the three places)."""
        try:
            self.get(name)
        except RegistryError:
            return False
        return True

    __contains__ = has

    def get_all(self) -> dict[str, T]:
        """Every registered name and object (entry points included when enabled)."""
        found: dict[str, T] = {}
        if self.entry_points:
            found.update(self.get_entry_points())
        registry = _core_registry(self.core_kind)
        if registry is not None:
            found.update({entry.name: entry.obj for entry in registry.entries()})
        with self._lock:
            found.update(self._items)
        return found

    def get_entry_points(self) -> dict[str, T]:
        """The objects published in the entry-point group, loaded."""
        return {ep.name: ep.load() for ep in self._entry_points()}

    def get_entry_point(self, name: str, default: T | None = None) -> T | None:
        """The object published under ``name`` in the entry-point group, or ``default``."""
        for ep in self._entry_points():
            if ep.name == name:
                return ep.load()
        return default

    def _entry_points(self) -> list[md.EntryPoint]:
        return list(md.entry_points(group=self.entry_point_group))

    def find(self, name: str) -> dict[str, str | int | None]:
        """Where the object registered under ``name`` is defined: module, file, line number and docstring."""
        obj = self.get(name)
        module = inspect.getmodule(obj)
        try:
            file: str | None = inspect.getsourcefile(obj)  # type: ignore[arg-type]
            line: int | None = inspect.getsourcelines(obj)[1]  # type: ignore[arg-type]
        except (TypeError, OSError):
            file, line = None, None
        return {'module': module.__name__ if module else None, 'file': file, 'line_no': line,
                'docstring': inspect.cleandoc(obj.__doc__) if getattr(obj, '__doc__', None) else None}

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.get_all()))

    def __repr__(self) -> str:
        return f'TypedRegistry({".".join(self.namespace)}: {sorted(self.get_all())})'


def _class_of(generic_type: Any) -> type | None:
    """``Stream`` for ``type[Stream]``, the class itself for a class, else None."""
    if typing.get_origin(generic_type) is type:
        args = typing.get_args(generic_type)
        return args[0] if args and inspect.isclass(args[0]) else None
    return generic_type if inspect.isclass(generic_type) and generic_type is not object else None


def _core_registry(kind: str | None) -> Any:
    """streaming-core's registry of ``kind`` when the core defines that kind, else None."""
    if kind is None:
        return None
    from streaming_core.machinery.lookup import KINDS, get_registry
    return get_registry(kind) if kind in KINDS else None


def create_registry(*namespace: str, generic_type: Any, entry_points: bool = False,
                    description: str = '', core_kind: str | None = None) -> TypedRegistry[Any]:
    """A new :class:`TypedRegistry` (the reference's constructor, plus the streaming-core kind to consult)."""
    return TypedRegistry(*namespace, generic_type=generic_type, entry_points=entry_points, description=description,
                         core_kind=core_kind)


def construct_from_registry(name: str, registry: TypedRegistry[Any], partial_function: bool = True,
                            pre_validation_function: Callable[[Any], None] | type | None = None,
                            post_validation_function: Callable[[Any], None] | None = None,
                            kwargs: dict[str, Any] | None = None) -> Any:
    """Build the object registered under ``name``.

    A class is called with ``kwargs``; a function too, unless ``partial_function`` (then a ``functools.partial`` of
    it with ``kwargs`` is returned). ``pre_validation_function`` checks the registered object first (a class: it
    must be a subclass of it); ``post_validation_function`` checks the result.
    """
    kwargs = dict(kwargs or {})
    registered = registry.get(name)
    if pre_validation_function is not None:
        if inspect.isclass(pre_validation_function):
            if not (inspect.isclass(registered) and issubclass(registered, pre_validation_function)):
                raise ValueError(f'Expected {name!r} in {".".join(registry.namespace)} to be a subclass of '
                                 f'{pre_validation_function.__name__}, got {registered!r}.')
        else:
            pre_validation_function(registered)
    if inspect.isclass(registered):
        built = registered(**kwargs)
    elif callable(registered):
        built = functools.partial(registered, **kwargs) if partial_function else registered(**kwargs)
    else:
        raise ValueError(f'Expected {name!r} in {".".join(registry.namespace)} to be a class or a function, got '
                         f'{type(registered).__name__}.')
    if post_validation_function is not None:
        post_validation_function(built)
    return built


def import_file(loc: str | os.PathLike[str]) -> ModuleType:
    """Import a Python file by path (so its ``register`` calls run) and return the module."""
    path = os.fspath(loc)
    if not os.path.isfile(path):
        raise FileNotFoundError(f'import_file: no such file {path!r}.')
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f'import_file: cannot import {path!r} as a Python module.')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def save_registry(registry: TypedRegistry[Any] | None = None) -> Iterator[None]:
    """Restore the in-process registrations of ``registry`` (default: the streams registry) on exit."""
    if registry is None:
        from streaming.base.stream import streams_registry
        registry = streams_registry
    saved = dict(registry._items)
    core = _core_registry(registry.core_kind)
    core_saved = {entry.name: entry for entry in core.entries()} if core is not None else {}
    try:
        yield
    finally:
        with registry._lock:
            registry._items.clear()
            registry._items.update(saved)
        if core is not None:
            for name in registry._items.keys() | set(core.names_from(registry.plugin_name)):
                old = core_saved.get(name)
                if old is None:
                    core.remove(name)
                else:
                    core.add(name, old.obj, plugin=old.plugin, override=True)
