"""The plugin-author API: everything a plugin may import from streaming-core, in one module.

A plugin imports from here and from the public facade (``streaming_core``), nothing else: the core's other modules
may move (issue 14 groups them into sub-packages) while the names here stay. Names resolve on first access, so
``from streaming_core.plugin_api import hookimpl, RegistryView`` in a plugin's ``plugin.py`` costs almost nothing
when the plugin loads; heavier helpers (the writer base class, numpy-based building blocks) load when used.

Why this name: ``streaming_core.plugins`` is the discovery machinery's module-level API (for the core and tests); a
``streaming_core.plugin`` beside it would differ by one letter, and the planned ``streaming_core/plugin/`` wing would
collide with it. ``plugin_api`` says what it is: the API for plugins.

Groups (see ``docs/plugins/api.md``):

* **Hooks and registries**: :data:`hookimpl`, :class:`RegistryView` (what a hook receives), :func:`get_registry`
  (look another plugin's name up), :class:`PluginHost`, :data:`KINDS`.
* **Protocols** (:mod:`streaming_core.interfaces`): :class:`Codec`, :class:`Compressor`, :class:`Hasher`,
  :class:`StorageBackend`, :class:`ShardFormat`, :class:`ShardReader`, :class:`ShardView`, :class:`ShuffleAlgorithm`,
  :class:`BatchingMethod`, :class:`IndexBuilder` (with :class:`SourceFile`, what it is given) and the factory
  aliases.
* **Errors** (:mod:`streaming_core.errors`): raise these so users get one kind of error whatever the plugin
  (a writer's encoder raises :class:`ColumnTypeError` for a value of the wrong type).
* **Readers and writers**: :class:`ShardReaderBase`, :class:`SplitShardView`, :func:`map_file`, :func:`read_offsets`,
  :func:`require_type`, :data:`MAX_SHARD_BYTES`, :class:`FileInfo`, :class:`ShardWriter`,
  :class:`MissingColumnError`, :func:`parse_size_limit`, :func:`pyjson_sorted`.
* **Storage backends**: :class:`StorageURL` (a URL parsed once), :class:`ClientCache` (per-process SDK clients),
  :class:`ProcessLocal` (per-process state dropped on pickling and after a fork), :func:`check_options`,
  :data:`LOCAL_FILE_ERRORS`, :func:`get_list_arg`, :func:`read_range` (ranged reads with retries),
  :func:`list_with_stats`, :class:`ListedObject`, :class:`ObjectStat`.
* **Redaction**: :func:`redact_url`, :func:`redact_text`, :func:`register_secret`, :func:`install_log_redaction`.
* **Compression**: :func:`decompress` (bounded by ``max_size``), :func:`compress`, :func:`parse_compression`,
  :func:`bounded_stream`, :func:`require_bytes`, :func:`expansion_error`.
* **Hashing**: :func:`get_hash`.
* **Ordering building blocks** (shuffles and batching methods): :func:`get_partitions`, :func:`traversal_order`,
  :class:`EpochPlanner`, :class:`World`.
* **Converters and recipes**: ``storage`` (the storage facade module: ``storage.exists(url)``,
  ``storage.join(root, name)``, ``storage.is_remote(url)``, ``storage.local_path(url)``, downloads and uploads with
  retries, ``storage.read_range(url, start, length)``), :func:`storage_options` (the ``--storage-option
  KEY=VALUE`` values of a parsed command line as a dict), :func:`add_writer_options` (a converter's output options:
  ``--format``, ``--compression``, ``--hashes``, ``--size-limit``, ``--exist-ok``, ``--quiet``,
  ``--storage-option``, and optionally ``--columns``, ``--workers``, ``--keep-local``), :func:`parse_out` (``OUT`` or
  ``LOCAL::REMOTE``), :func:`getitem` (NumPy-style indexing over a sized sequence),
  :func:`cache_root` (the directory under which streaming-core keeps its caches and state, for a plugin's own).
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming_core.hookspecs import KINDS as KINDS
from streaming_core.hookspecs import hookimpl as hookimpl
from streaming_core.name_registry import RegistryView as RegistryView

_ERRORS = ('StreamingError', 'UnknownNameError', 'DuplicateNameError', 'PluginLoadError', 'IndexFormatError',
           'EmptyDatasetError', 'UnsafePathError', 'ShardCorruptError', 'UnsafeTypeError', 'HashMismatchError',
           'StorageError', 'PermanentStorageError', 'RemoteNotFoundError', 'TruncatedDownloadError', 'UploadError',
           'CacheLimitError', 'WaitTimeoutError', 'CodecError', 'ColumnTypeError', 'SampleSizeError',
           'WorkerDiedError')
_PROTOCOLS = ('Codec', 'CodecFactory', 'Compressor', 'Hasher', 'StorageBackend', 'StorageBackendFactory',
              'ShardFormat', 'ShardReader', 'ShardView', 'ShuffleAlgorithm', 'BatchingMethod', 'IndexBuilder')

#: ``{name: module}`` of every lazily resolved name.
_LAZY: dict[str, str] = {
    **{name: 'streaming_core.errors' for name in _ERRORS},
    **{name: 'streaming_core.interfaces' for name in _PROTOCOLS},
    'get_registry': 'streaming_core.plugin_host',
    'PluginHost': 'streaming_core.plugin_host',
    'Registry': 'streaming_core.name_registry',
    # Readers and writers.
    'ShardReaderBase': 'streaming_core.shard',
    'SplitShardView': 'streaming_core.shard',
    'map_file': 'streaming_core.shard',
    'read_offsets': 'streaming_core.shard',
    'require_type': 'streaming_core.shard',
    'MAX_SHARD_BYTES': 'streaming_core.shard',
    'FileInfo': 'streaming_core.index',
    'ShardWriter': 'streaming_core.writer',
    'MissingColumnError': 'streaming_core.writer',
    'parse_size_limit': 'streaming_core.writer',
    'pyjson_sorted': 'streaming_core.util',
    # Storage backends.
    'StorageURL': 'streaming_core.storage_url',
    'ClientCache': 'streaming_core.clients',
    'ProcessLocal': 'streaming_core.storage',
    'check_options': 'streaming_core.storage',
    'LOCAL_FILE_ERRORS': 'streaming_core.storage',
    'get_list_arg': 'streaming_core.arguments',
    'read_range': 'streaming_core.storage',
    'SourceFile': 'streaming_core.derived_index',
    'list_with_stats': 'streaming_core.storage',
    'ListedObject': 'streaming_core.storage',
    'ObjectStat': 'streaming_core.storage',
    # Redaction.
    'redact_url': 'streaming_core.util',
    'redact_text': 'streaming_core.redact',
    'register_secret': 'streaming_core.redact',
    'install_log_redaction': 'streaming_core.redact',
    # Compression and hashing.
    'decompress': 'streaming_core.compression',
    'compress': 'streaming_core.compression',
    'parse_compression': 'streaming_core.compression',
    'bounded_stream': 'streaming_core.builtin.compression',
    'require_bytes': 'streaming_core.builtin.compression',
    'expansion_error': 'streaming_core.builtin.compression',
    'get_hash': 'streaming_core.hashing',
    # Ordering building blocks.
    'get_partitions': 'streaming_core.partition',
    'traversal_order': 'streaming_core.partition',
    'EpochPlanner': 'streaming_core.planning',
    'World': 'streaming_core.world',
    # Converters and recipes.
    'storage': 'streaming_core.storage',
    'storage_options': 'streaming_core.commands._common',
    'add_writer_options': 'streaming_core.commands.convert',
    'parse_out': 'streaming_core.commands.convert',
    'getitem': 'streaming_core.indexing',
    'cache_root': 'streaming_core.paths',
}
#: Names that are whole modules (resolved to the module itself).
_MODULES = {'storage'}

__all__ = sorted(['hookimpl', 'RegistryView', 'KINDS', *_LAZY])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}; the plugin-author API is '
                             f'{", ".join(__all__)}')
    imported = importlib.import_module(module)
    value = imported if name in _MODULES else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
