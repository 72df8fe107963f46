"""Hook specifications: the reference documentation for plugin authors.

A plugin is a module (or object) with functions decorated by :data:`hookimpl`, published through an entry point
in the group ``streaming_core``::

    # pyproject.toml of your distribution
    [project.entry-points.streaming_core]
    my_plugin = "my_package.plugin"

Each hook receives a registry view; call ``registry.add(name, implementation)`` once per name. The name is what
users write in constructors (``columns={'x': 'my_codec'}``, ``compression='my_comp:3'``,
``shuffle_algo='my_shuffle'``). Registering a name that another plugin already registered is an error naming
both plugins unless ``override=True`` is passed. The protocols each implementation satisfies are in
:mod:`streaming_core.machinery.protocols`.

Every hook is optional: implement only those you need. A function marked with :data:`hookimpl` whose name is not
one of the hooks below (``register_codec`` for ``register_codecs``) is an error when the plugin loads, naming the
plugin, the function and the closest hook; mark a hook of a newer streaming-core that older versions may lack with
``@hookimpl(optionalhook=True)``. Hooks are called through pluggy one plugin at a time (the builtins first, then the
entry points sorted by name), so ``tryfirst``/``trylast`` and wrappers order a plugin's own implementations of a
hook, and an implementation may leave out arguments it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

import pluggy

if TYPE_CHECKING:
    from streaming_core.machinery.name_registry import RegistryView

__all__ = ['PROJECT', 'ENTRY_POINT_GROUP', 'CONVERTER_GROUP', 'hookspec', 'hookimpl', 'KINDS', 'KIND_WORDS',
           'kinds_from_specs']

#: The project name: pluggy's marker name, the entry-point group plugins are published in, and the prefix of every
#: other name derived from it. The one place the project's name is spelled.
PROJECT = 'streaming_core'
#: The entry-point group of plugins.
ENTRY_POINT_GROUP = PROJECT
#: The deprecated entry-point group of ``streaming convert`` converters (use the ``register_converters`` hook).
CONVERTER_GROUP = f'{PROJECT}.converters'

_spec = pluggy.HookspecMarker(PROJECT)
#: Decorate your hook implementations with this marker.
hookimpl = pluggy.HookimplMarker(PROJECT)

_F = TypeVar('_F', bound=Callable[..., None])


def hookspec(kind: str, word: str) -> Callable[[_F], _F]:
    """Mark a registration hook specification for the registry ``kind``, described to users as ``word``.

    The catalogue of kinds (:data:`KINDS`) is derived from the functions marked here, so a new hook is one function.
    """
    def mark(function: _F) -> _F:
        function.streaming_kind = kind  # type: ignore[attr-defined]
        function.streaming_word = word  # type: ignore[attr-defined]
        return _spec(function)
    return mark


@hookspec('codec', 'column encoding')
def register_codecs(registry: RegistryView) -> None:
    """Register MDS column encodings (codecs).

    Register a *codec factory* per name: a callable that receives the text after the first ``:`` of the
    column's encoding string (``None`` when there is no colon or nothing after it) and returns a
    :class:`~streaming_core.machinery.protocols.Codec`. A class whose ``__init__(self, args=None)`` parses its
    arguments is the usual choice. The encoding string is stored verbatim in ``index.json``, so readers of
    the dataset need the same plugin installed.

    Example::

        class Rot13:
            size = None        # variable size
            unsafe = False
            def __init__(self, args=None):
                if args:
                    raise ValueError('rot13 takes no arguments')
            def encode(self, obj): return codecs.encode(obj, 'rot13').encode()
            def decode(self, data): return codecs.decode(bytes(data).decode(), 'rot13')

        @hookimpl
        def register_codecs(registry):
            registry.add('rot13', Rot13)

    Then ``MDSWriter(columns={'text': 'rot13'}, ...)`` uses it.
    """


@hookspec('compressor', 'compression')
def register_compressors(registry: RegistryView) -> None:
    """Register compression families.

    Register one :class:`~streaming_core.machinery.protocols.Compressor` per family name. Users select
    ``'<family>'`` or ``'<family>:<level>'``; the level must be one of ``compressor.levels``. The compressor's
    ``extension`` names the compressed files writers produce (``shard.00000.mds.<extension>``; the first-party
    families use their name); readers find those files by the names ``index.json`` lists, never by extension.

    Example::

        @hookimpl
        def register_compressors(registry):
            registry.add('xz', XzCompressor())   # levels = range(0, 10), default_level = 6
    """


@hookspec('hash', 'hash algorithm')
def register_hashes(registry: RegistryView) -> None:
    """Register hash algorithms for shard integrity.

    Register one :class:`~streaming_core.machinery.protocols.Hasher` per name: a callable taking a bytes-like object and
    returning the lowercase hex digest. Writers record it under ``hashes`` in ``index.json``; readers check it
    when ``validate_hash='<name>'``.

    Example::

        @hookimpl
        def register_hashes(registry):
            registry.add('crc32', lambda data: format(zlib.crc32(data), '08x'))
    """


@hookspec('storage', 'storage scheme')
def register_storage_backends(registry: RegistryView) -> None:
    """Register storage backends by URL scheme.

    Register a *backend factory* per scheme (``'s3'``, ``'gs'``, ``'https'``...): a callable that receives the
    backend options as keyword arguments (the ``storage_options`` a user gave a ``Stream`` or writer, possibly
    empty) and returns a :class:`~streaming_core.machinery.protocols.StorageBackend`. Import your SDK lazily, inside the
    factory or the first request, never at module import. Factories are called once per process and options
    set; do not keep clients that cannot be pickled on objects that are pickled.

    Example::

        @hookimpl
        def register_storage_backends(registry):
            registry.add('myfs', MyFsBackend)     # MyFsBackend(**options)
    """


@hookspec('format', 'shard format')
def register_shard_formats(registry: RegistryView) -> None:
    """Register shard formats by the name ``index.json`` uses in each shard entry's ``format`` field.

    Register one :class:`~streaming_core.machinery.protocols.ShardFormat` per name. It validates index entries, opens
    shards for reading and provides the writer class used by the format's public writer. A format that takes
    options (``Stream(columns=...)``, ``format_options=``) lists their names in ``option_names`` and returns, from
    ``configure(options)``, a copy of itself whose readers apply them; a format without ``option_names`` refuses
    every option with a :class:`~streaming_core.reading.derived_index.FormatOptionError` naming it.

    Units that share a file. Each index entry is a *unit*: what shuffles, partitions, batching and resumption see.
    Usually a unit is its own file, but a format may cut a file into several units that all name it in ``raw_data``
    (Parquet: one unit per row group). Such a format declares ``units_share_files = True``, and the units naming one
    file must follow each other in the index (otherwise the dataset is refused with an ``IndexFormatError``). The
    core then handles the file once for all of its units: it is downloaded once per node (whichever unit is read
    first), counted once under ``cache_limit``, and evicted only when none of its units is in use; evicting it makes
    every one of its units not ready, and the next read of any of them downloads it again. ``streaming inspect``
    counts its bytes once and ``streaming verify`` downloads and checks it once. An optional ``unit_word`` (such as
    ``'row group'``) names the units in those commands' output (``6 row groups in 2 files``); without it they say
    ``units``. For a format without the declaration, every unit is a file of its own to the cache.

    Example::

        @hookimpl
        def register_shard_formats(registry):
            registry.add('parquet', ParquetFormat())   # declares units_share_files = True
    """


@hookspec('index_builder', 'index builder')
def register_index_builders(registry: RegistryView) -> None:
    r"""Register index builders: formats whose files index themselves, read with no ``index.json``.

    Register one :class:`~streaming_core.machinery.protocols.IndexBuilder` per name (the name users pass as
    ``format=``). When a stream's directory has no ``index.json``, the core lists it (names, sizes, etags or
    modification times) and, when ``format=`` names a builder or exactly one builder's ``patterns`` match the listing,
    calls ``builder.build(files, read, where=...)`` once per node: ``files`` are the matching
    :class:`~streaming_core.reading.derived_index.SourceFile` objects sorted by name, ``read(name, start, length)``
    reads a byte range of one of them (one ranged request; read footers, never whole files). The builder returns the
    same index the runtime consumes, ``{'shards': [...], 'version': 2}``, whose entries a registered shard format reads
    (its ``raw_data`` basenames are the listed names, so each file is downloaded as a shard). The result is kept
    in the state directory, keyed by the listing, and rebuilt when the listing changes; an ``index.json`` in the
    directory always wins. Raise :class:`~streaming_core.errors.IndexFormatError` naming the file (and the column)
    for files that cannot be read together, and ``ShardCorruptError`` for a damaged file.

    Example (a format of text files, one sample per line, that a shard format ``lines`` reads)::

        class LinesIndexBuilder:
            name = 'lines'
            patterns = ('*.lines',)

            def build(self, files, read, *, where):
                shards = []
                for item in files:
                    count = read(item.name, 0, item.size).count(b'\n')  # tiny files: read them whole
                    shards.append({'format': 'lines', 'version': 2, 'samples': count, 'compression': None,
                                   'hashes': [], 'size_limit': None, 'zip_data': None,
                                   'raw_data': {'basename': item.name, 'bytes': item.size, 'hashes': {}}})
                return {'shards': shards, 'version': 2}

        @hookimpl
        def register_index_builders(registry):
            registry.add('lines', LinesIndexBuilder())

    Then ``Stream(remote='s3://bucket/texts', format='lines')`` (or no ``format=``: the ``*.lines`` files are
    detected) streams the directory.

    Another library's ``index.json`` (a JSON object with no ``shards`` key, such as litdata's) is read the same way
    by a builder with the optional method ``claims_index(obj) -> bool`` that returns True for it: the core then
    calls ``build([SourceFile('index.json', ...)], read, where=...)`` with that file served from memory, and keeps
    the result keyed by the file's content (rebuilt when it changes). Such a builder may leave ``patterns`` empty so
    that a directory without its own ``index.json`` is never taken for its format. When no builder claims a foreign
    ``index.json``, the error names the file and the distribution to install for a known format.

    A builder that takes format options (``Stream(columns=...)``, ``format_options={...}``) declares their names in
    ``option_names`` and returns a configured builder from ``configure(options)``; the options are part of the
    derived index's identity, and an option the builder does not declare is a ``FormatOptionError`` naming it.

    A builder may declare ``index_version`` (an int: the layout of the entries it writes). It is part of the derived
    index's identity, so when a release of the builder changes its ``index_version``, an index kept by the earlier
    release is rebuilt on the next construction and never read in the old layout; the files already downloaded are
    kept when they did not change. Raise it whenever the entries you write change (streaming-parquet went from one
    entry per file to one per row group with ``index_version = 2``). A builder may write several entries naming one
    file when its shard format declares ``units_share_files`` (see ``register_shard_formats``).
    """


@hookspec('shuffle', 'shuffle algorithm')
def register_shuffle_algorithms(registry: RegistryView) -> None:
    """Register shuffle algorithms, selected with ``StreamingDataset(shuffle_algo=<name>)``.

    Register one :class:`~streaming_core.machinery.protocols.ShuffleAlgorithm` per name: a callable
    ``(shard_sizes, num_canonical_nodes, seed, epoch, block_size) -> permutation`` returning an int64 array that
    permutes ``0..sum(shard_sizes)-1``. Canonical node ``c`` owns output positions
    ``[c*N//NCN, (c+1)*N//NCN)``; a good algorithm keeps each node's positions on few shards.

    An algorithm declares its properties as boolean attributes, which the planner reads (it never tests a
    shuffle's name; an absent attribute is False):

    * ``splits_canonical_nodes``: it shuffles only within each canonical node's share (``py1s``, ``py2s``), so the
      default ``num_canonical_nodes`` is 64 per physical node instead of one.
    * ``spreads_shards_within_block``: it spreads each shard's samples over about ``block_size`` positions
      (``py1e``, ``py1n``), so the planner warns ``Shuffle block size was smaller than shard size ...`` when the
      largest shard holds more samples than ``shuffle_block_size``, for every plan, computed or read from the plan
      cache. The shuffle itself does not warn.

    Example::

        def reverse(sizes, ncn, seed, epoch, block):
            return np.arange(sum(sizes))[::-1].copy()

        reverse.splits_canonical_nodes = True  # treated like py1s: 64 canonical nodes per physical node

        @hookimpl
        def register_shuffle_algorithms(registry):
            registry.add('reverse', reverse)
    """


@hookspec('batching', 'batching method')
def register_batching_methods(registry: RegistryView) -> None:
    """Register batching methods, selected with ``StreamingDataset(batching_method=<name>)``.

    Register one :class:`~streaming_core.machinery.protocols.BatchingMethod` per name: a callable
    ``(plan: EpochPlanner, world: World, epoch: int, sample_in_epoch: int) -> ndarray`` returning the int64 array
    of shape ``(nodes, ranks_per_node, workers_per_rank, batches_per_worker, batch_size)`` of sample IDs, ``-1``
    for padding. :class:`~streaming_core.ordering.planner.EpochPlanner` offers the resampling, partitioning and
    shuffling building blocks. A method whose global batches depend on the number of nodes and ranks (not only on
    the global batch size) sets ``elastic = False`` on the callable: a resumption state saved on another
    data-parallel world is then refused instead of losing and repeating samples.

    Example (no shuffle, the canonical order partitioned over the world)::

        from streaming_core.ordering.partition import get_partitions

        @hookimpl
        def register_batching_methods(registry):
            registry.add('sequential', lambda plan, world, epoch, done: get_partitions(
                'orig', plan.epoch_size, plan.num_canonical_nodes, world.num_nodes, world.ranks_per_node,
                world.workers_per_rank, plan.batch_size, done))
    """


@hookspec('stream', 'stream class')
def register_streams(registry: RegistryView) -> None:
    """Register :class:`~streaming_core.Stream` subclasses, selected with
    ``StreamingDataset(stream_name=<name>, stream_config={...})``.

    Register one class per name; the dataset builds each stream as ``cls(**stream_config, remote=..., local=...)``
    from its own arguments (or from ``streams=[...]`` entries). The builtin ``'stream'`` is
    :class:`~streaming_core.Stream`. The engine honours the overridable methods listed in the migration guide
    (``get_shards`` called by keyword, ``prepare_shard``, ``_download_file``, ``_decompress_shard_part``).

    Example::

        from streaming_core import Stream

        class MirroredStream(Stream):
            def _download_file(self, from_basename, to_basename=None):
                ...

        @hookimpl
        def register_streams(registry):
            registry.add('mirrored', MirroredStream)
    """


@hookspec('converter', 'converter')
def register_converters(registry: RegistryView) -> None:
    """Register converters, the subcommands of streaming convert.

    Register one *converter* per subcommand name: a callable ``register(subparsers)`` that adds exactly that
    subparser and sets its handler with ``parser.set_defaults(run=handler)``; ``handler(args)`` returns the exit
    code (or None for 0). The converter module is imported when the plugin loads, so keep heavy imports (datasets,
    image libraries) inside the handler. A converter that fails to register never breaks the ``streaming`` command:
    running it reports the plugin and the cause.

    Example::

        def add_cifar10(subparsers):
            parser = subparsers.add_parser('cifar10', help='CIFAR-10 from its python tarball')
            parser.add_argument('src')
            parser.add_argument('out')
            parser.set_defaults(run=lambda args: convert_cifar10(args.src, args.out))

        @hookimpl
        def register_converters(registry):
            registry.add('cifar10', add_cifar10)

    The entry-point group ``streaming_core.converters`` (one ``register`` function per entry point) still works but
    is deprecated: it warns with a :class:`DeprecationWarning` naming the entry point.
    """


def kinds_from_specs() -> dict[str, str]:
    """``{kind: hook name}`` for every hook specification of this module, in the order they are defined."""
    found = {}
    for name, value in list(globals().items()):
        kind = getattr(value, 'streaming_kind', None)
        if callable(value) and isinstance(kind, str):
            found[kind] = name
    return found


#: The kinds of implementation a plugin can register, with the hook that registers each (from the specs above).
KINDS: dict[str, str] = kinds_from_specs()
#: How each kind is named in messages to users (``Unknown shard format 'x'``).
KIND_WORDS: dict[str, str] = {kind: globals()[hook].streaming_word for kind, hook in KINDS.items()}
