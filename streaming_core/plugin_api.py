"""The plugin-author API: everything a plugin may import from streaming-core, in one module.

A plugin imports from here and from the public facade (``streaming_core``), nothing else: the core's other modules
may move (issue 14 groups them into sub-packages) while the names here stay. Names resolve on first access, so
``from streaming_core.plugin_api import hookimpl, RegistryView`` in a plugin's ``plugin.py`` costs almost nothing
when the plugin loads; heavier helpers (the writer base class, numpy-based building blocks) load when used.

Why this name: the plugin machinery lives in the ``streaming_core.machinery`` wing (discovery, the host, the
registries); a ``streaming_core.plugin`` would be read as that machinery. ``plugin_api`` says what it is: the API
for plugins.

Groups (see ``docs/plugins/api.md``):

* **Hooks and registries**: :data:`hookimpl`, :class:`RegistryView` (what a hook receives), :func:`get_registry`
  (look another plugin's name up), :class:`PluginHost` (with :class:`HostConfig`, :func:`using_host`), :data:`KINDS`.
* **Protocols** (:mod:`streaming_core.machinery.protocols`): :class:`Codec`, :class:`Compressor`, :class:`Hasher`,
  :class:`StorageBackend`, :class:`ShardFormat`, :class:`ShardReader`, :class:`ShardView`, :class:`ShuffleAlgorithm`,
  :class:`BatchingMethod`, :class:`IndexBuilder` (with :class:`SourceFile`, what it is given) and the factory
  aliases.
* **Errors** (:mod:`streaming_core.errors`): raise these so users get one kind of error whatever the plugin
  (a writer's encoder raises :class:`ColumnTypeError` for a value of the wrong type).
* **Readers and writers**: :class:`ShardReaderBase`, :class:`SplitShardView`, :func:`map_file`, :func:`read_offsets`,
  :func:`require_type`, :data:`MAX_SHARD_BYTES`, :class:`FileInfo`, :class:`ShardWriter`,
  :class:`MissingColumnError`, :func:`parse_size_limit`, :func:`pyjson_sorted`; for a format's ``columns``
  option, :func:`columns_option` and :func:`checked_projection`; for Parquet readers, :func:`check_page_checksums`
  (whether :data:`PAGE_CHECKSUMS_ENV` leaves the page-checksum check on).
* **Storage backends**: :class:`StorageURL` (a URL parsed once), :class:`ClientCache` (per-process SDK clients),
  :class:`ProcessLocal` (per-process state dropped on pickling and after a fork), :func:`check_options`,
  :data:`LOCAL_FILE_ERRORS`, :func:`get_list_arg`, :func:`bytes_to_int`, :func:`read_range` (ranged reads with retries),
  :func:`list_with_stats`, :class:`ListedObject`, :class:`ObjectStat`, :func:`carry_environment` (environment
  variables a pickled dataset carries into DataLoader workers and spawned ranks).
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
from streaming_core.machinery.name_registry import RegistryView as RegistryView

_ERRORS = ('StreamingError', 'UnknownNameError', 'DuplicateNameError', 'PluginLoadError', 'IndexFormatError',
           'EmptyDatasetError', 'UnsafePathError', 'ShardCorruptError', 'UnsafeTypeError', 'HashMismatchError',
           'StorageError', 'PermanentStorageError', 'RemoteNotFoundError', 'TruncatedDownloadError', 'UploadError',
           'CacheLimitError', 'WaitTimeoutError', 'CodecError', 'ColumnTypeError', 'SampleSizeError',
           'WorkerDiedError', 'FormatOptionError', 'UnknownColumnError', 'DirectoryNotEmptyError', 'OutputBusyError',
           'DatasetVersionError')
_PROTOCOLS = ('Codec', 'CodecFactory', 'Compressor', 'Hasher', 'StorageBackend', 'StorageBackendFactory',
              'ShardFormat', 'ShardReader', 'ShardView', 'ShuffleAlgorithm', 'BatchingMethod', 'IndexBuilder')

#: ``{name: module}`` of every lazily resolved name.
_LAZY: dict[str, str] = {
    **{name: 'streaming_core.errors' for name in _ERRORS},
    **{name: 'streaming_core.machinery.protocols' for name in _PROTOCOLS},
    'get_registry': 'streaming_core.machinery.host',
    'PluginHost': 'streaming_core.machinery.host',
    'HostConfig': 'streaming_core.machinery.host',
    'using_host': 'streaming_core.machinery.host',
    'Registry': 'streaming_core.machinery.name_registry',
    # Readers and writers.
    'ShardReaderBase': 'streaming_core.reading.shard_entry',
    'SplitShardView': 'streaming_core.reading.shard_entry',
    'map_file': 'streaming_core.reading.shard_entry',
    'read_offsets': 'streaming_core.reading.shard_entry',
    'require_type': 'streaming_core.reading.shard_entry',
    'MAX_SHARD_BYTES': 'streaming_core.reading.shard_entry',
    'FileInfo': 'streaming_core.reading.index_file',
    'ShardWriter': 'streaming_core.writing.writer',
    'MissingColumnError': 'streaming_core.writing.writer',
    'parse_size_limit': 'streaming_core.writing.writer',
    'columns_option': 'streaming_core.reading.format_options',
    'checked_projection': 'streaming_core.reading.format_options',
    'PAGE_CHECKSUMS_ENV': 'streaming_core.reading.format_options',
    'check_page_checksums': 'streaming_core.reading.format_options',
    'pyjson_sorted': 'streaming_core.reading.index_file',
    # Storage backends.
    'StorageURL': 'streaming_core.storage.url',
    'ClientCache': 'streaming_core.storage.clients',
    'ProcessLocal': 'streaming_core.common.fork_safe',
    'carry_environment': 'streaming_core.common.fork_safe',
    'check_options': 'streaming_core.storage.facade',
    'LOCAL_FILE_ERRORS': 'streaming_core.storage.facade',
    'get_list_arg': 'streaming_core.common.arguments',
    'bytes_to_int': 'streaming_core.common.arguments',
    'read_range': 'streaming_core.storage.facade',
    'check_content_range': 'streaming_core.storage.store_answers',
    'SourceFile': 'streaming_core.reading.derived_index',
    'list_with_stats': 'streaming_core.storage.facade',
    'ListedObject': 'streaming_core.storage.facade',
    'ObjectStat': 'streaming_core.storage.facade',
    # Redaction.
    'redact_url': 'streaming_core.storage.redact',
    'redact_text': 'streaming_core.storage.redact',
    'register_secret': 'streaming_core.storage.redact',
    'install_log_redaction': 'streaming_core.storage.redact',
    # Compression and hashing.
    'decompress': 'streaming_core.storage.compression',
    'compress': 'streaming_core.storage.compression',
    'parse_compression': 'streaming_core.storage.compression',
    'bounded_stream': 'streaming_core.builtin.compression',
    'require_bytes': 'streaming_core.builtin.compression',
    'expansion_error': 'streaming_core.builtin.compression',
    'get_hash': 'streaming_core.storage.hashing',
    # Ordering building blocks.
    'get_partitions': 'streaming_core.ordering.partition',
    'traversal_order': 'streaming_core.ordering.partition',
    'EpochPlanner': 'streaming_core.ordering.planner',
    'World': 'streaming_core.ordering.world',
    # Converters and recipes.
    'storage': 'streaming_core.storage.facade',
    'storage_options': 'streaming_core.tools.commands._common',
    'add_writer_options': 'streaming_core.tools.commands.convert',
    'parse_out': 'streaming_core.tools.commands.convert',
    'getitem': 'streaming_core.reading.numpy_indexing',
    'cache_root': 'streaming_core.common.paths',
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
