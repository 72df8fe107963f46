"""Old import paths of modules that moved into the core's wings, kept working as aliases of the new modules.

``import streaming_core.shards`` (and ``from streaming_core import shards``) returns the very module object of
:mod:`streaming_core.reading.shard_manager`: the same functions, classes and globals, so ``isinstance`` checks and
monkeypatching through an old path keep working. A moved package maps every submodule too
(``streaming_core.convert.runner`` is ``streaming_core.tools.convert.runner``). The deprecation policy is in
``docs/architecture.md``: an old path keeps working for at least two minor releases after the move, then warns for
one more before it is removed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types

#: Old module path -> new module path, relative to ``streaming_core``.
MOVED: dict[str, str] = {
    'plugin_host': 'machinery.host',
    'plugin_manifest': 'machinery.manifest',
    'plugins': 'machinery.discovery',
    'name_registry': 'machinery.name_registry',
    'registry': 'machinery.lookup',
    'interfaces': 'machinery.protocols',
    'stream': 'reading.stream',
    'index': 'reading.index_file',
    'index_stream': 'reading.index_file_stream',
    'index_sync': 'reading.index_sync',
    'index_versions': 'reading.index_versions',
    'binary_index': 'reading.binary_index',
    'derived_index': 'reading.derived_index',
    'cache_record': 'reading.cache_record',
    'catalogue': 'reading.catalogue',
    'spanner': 'reading.spanner',
    'shard': 'reading.shard_entry',
    'shards': 'reading.shard_manager',
    'cache': 'reading.cache_limit',
    'iteration': 'reading.iteration',
    'dataset': 'reading.dataset',
    'local': 'reading.local_dataset',
    'dataloader': 'reading.dataloader',
    'shared_state': 'reading.shared_state',
    'indexing': 'reading.numpy_indexing',
    'world': 'ordering.world',
    'order_config': 'ordering.order_config',
    'planning': 'ordering.planner',
    'plans': 'ordering.plan_cache',
    'partition': 'ordering.partition',
    'sampling': 'ordering.sampling',
    'writer': 'writing.writer',
    'merge': 'writing.merge',
    'compression': 'storage.compression',
    'hashing': 'storage.hashing',
    'storage_url': 'storage.url',
    'clients': 'storage.clients',
    'redact': 'storage.redact',
    'retries': 'storage.retries',
    'locking': 'storage.locking',
    'paths': 'common.paths',
    'arguments': 'common.arguments',
    'spark': 'tools.spark',
    'commands': 'tools.commands',
    'convert': 'tools.convert',
    'simulation': 'tools.simulation',
    'integrations': 'tools.integrations',
}
# ``streaming_core.storage`` was a module and is now the storage wing, which re-exports the facade's names itself.

_PREFIX = 'streaming_core.'


def new_path(old: str) -> str | None:
    """The module that replaced ``old`` (a dotted path), or None when ``old`` did not move."""
    if not old.startswith(_PREFIX):
        return None
    rest = old[len(_PREFIX):]
    head, dot, tail = rest.partition('.')
    target = MOVED.get(head)
    if target is None:
        return None
    return _PREFIX + target + dot + tail


class _AliasLoader:
    """A loader (duck-typed, so ``importlib.abc`` and its imports stay out of ``import streaming_core``)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system reads the module back from sys.modules after this call, so the alias is the real module.
        sys.modules[module.__name__] = importlib.import_module(self.target)


class MovedModuleFinder:
    """Resolve an old import path of a moved module to the module at its new path."""

    def find_spec(self, fullname: str, path: object = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        moved = new_path(fullname)
        if moved is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(moved))


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once per process)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
