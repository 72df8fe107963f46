"""litdata's ``index.json`` (``{"chunks": [...], "config": {...}}``) as a streaming-core index: one ``litdata``
entry per chunk file.

Whole-file zstd chunks (``compression_level='chunk'``: ``chunk-R-N.zstd.bin``) become compressed shards
(``compression='zstd'``, ``zip_data`` the ``.zstd.bin`` file, ``raw_data`` its decompressed copy named as litdata
names it, ``chunk-R-N.bin``), which the core downloads, decompresses (bounded by ``chunk_bytes``), counts towards
``cache_limit`` and evicts like any compressed shard. Their compressed sizes, which ``index.json`` does not record,
come from a listing or ranged reads (:mod:`streaming_litdata.sizes`). A chunk litdata already decompressed in place
(its ``.bin`` beside ``index.json``, the ``.zstd.bin`` gone, as litdata's own reader leaves a local dataset) is read
as a plain chunk.

Features litdata can write that this plugin does not read are refused by name, never misread: encryption, codecs
other than zstd, Arrow IPC compression, item loaders other than the default ``PyTreeLoader`` (token and temporal
loaders), and data formats :mod:`streaming_litdata.decode` does not decode.

``columns=[...]`` (the stream's ``columns`` format option, handed to :meth:`LitdataIndexBuilder.configure`) keeps only
those top-level keys of each item (items written as dicts): every entry records them (``columns``) and the reader
decodes only their leaves. A key the items do not have is refused when the index is derived, naming the file, the
key and the keys there are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from streaming_core.plugin_api import IndexFormatError, UnknownColumnError, columns_option
from streaming_litdata.decode import parse_spec, top_level_keys
from streaming_litdata.sizes import WINDOW, Read, probe_sizes, window_for, zstd_bound

__all__ = ['LitdataIndexBuilder', 'convert_index', 'checked_columns', 'in_file_compression', 'whole_file_suffix',
           'is_litdata_index', 'INDEX_NAME']

#: The name of litdata's index file.
INDEX_NAME = 'index.json'


def is_litdata_index(obj: Any) -> bool:
    """Whether a parsed ``index.json`` is litdata's (``chunks`` and ``config``, no ``shards``)."""
    return isinstance(obj, dict) and isinstance(obj.get('chunks'), list) and isinstance(obj.get('config'), dict) \
        and 'shards' not in obj


def _refuse(config: dict[str, Any], where: str) -> None:
    if config.get('encryption'):
        raise IndexFormatError(f'{where}: the dataset is encrypted (litdata encryption); streaming-litdata does not '
                               f'read encrypted chunks. Decrypt it with litdata (or write it without encryption).')
    compression = config.get('compression')
    if compression and not (compression == 'zstd' or str(compression).startswith('zstd:')):
        raise IndexFormatError(f'{where}: the dataset uses litdata compression={compression!r}; streaming-litdata '
                               f'reads only zstd chunks. Write it with compression="zstd", or convert it with litdata.')
    if config.get('ipc_compression'):
        raise IndexFormatError(f'{where}: the dataset uses litdata ipc_compression={config["ipc_compression"]!r} '
                               f'(compressed Arrow row footers), which streaming-litdata does not read yet. Write it '
                               f'without compression, or convert it with litdata.')
    loader = config.get('item_loader', 'PyTreeLoader')
    if loader != 'PyTreeLoader':
        raise IndexFormatError(f'{where}: the dataset uses litdata\'s {loader}; only the default PyTreeLoader layout '
                               f'is supported.')


def in_file_compression(config: dict[str, Any], where: str) -> str | None:
    """How the chunks' items are compressed inside each ``.bin``: ``'batch'`` (litdata's framed zstd, the default of
    ``compression="zstd"``), ``'sample'`` (one zstd frame per item) or None (not compressed inside the file: no
    compression, or whole-file ``.zstd.bin`` chunks, see :func:`whole_file_suffix`).

    Raises:
        IndexFormatError: a ``compression_level`` litdata does not write, named.
    """
    if not config.get('compression'):
        return None
    level = config.get('compression_level') or 'chunk'
    if level in ('batch', 'sample'):
        return str(level)
    if level == 'chunk':
        return None
    raise IndexFormatError(f'{where}: the dataset uses litdata compression={config["compression"]!r} with '
                           f'compression_level={level!r}, which litdata 0.2.76 does not write (only "chunk", '
                           f'"batch" or "sample"); it cannot be read.')


def whole_file_suffix(config: dict[str, Any]) -> str | None:
    """The file name ending of whole-file compressed chunks (``'.zstd.bin'``: litdata names them
    ``chunk-R-N.<compression>.bin``), or None when the dataset has none (no compression, or in-file levels)."""
    compression = config.get('compression')
    if not compression or (config.get('compression_level') or 'chunk') != 'chunk':
        return None
    return f'.{compression}.bin'


def _file(name: str, size: int) -> dict[str, Any]:
    return {'basename': name, 'bytes': size, 'hashes': {}}


def _whole_file_entries(chunks: list[tuple[str, int, int]], suffix: str, read: Read | None, listed: dict[str, int],
                        where: str, window: int) -> dict[int, tuple[dict[str, Any], dict[str, Any] | None]]:
    """``{chunk number: (raw_data, zip_data or None)}`` for the chunks whose name ends with ``suffix``."""
    names = {name for name, _, _ in chunks}
    numbers = [n for n, (name, _, _) in enumerate(chunks) if name.endswith(suffix)]
    raws = {}
    for n in numbers:
        name, _, size = chunks[n]
        raw = name[:-len(suffix)] + '.bin'
        if raw in names or raw in raws.values() or not name[:-len(suffix)]:
            raise IndexFormatError(f'{where}: chunk {n} ({name}) decompresses to {raw}, which another chunk also '
                                   f'names; index.json is inconsistent.')
        raws[n] = raw
    unlisted = [n for n in numbers if chunks[n][0] not in listed]
    if unlisted and read is None:
        raise IndexFormatError(f'{where}: the whole-file zstd chunks ({suffix}) need their compressed sizes, which '
                               f'index.json does not record; give the directory listing or a ranged reader.')
    wanted = [(chunks[n][0], zstd_bound(chunks[n][2])) for n in unlisted]
    probed = dict(zip(unlisted, probe_sizes(read, wanted, where, window))) if read is not None else {}
    out: dict[int, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for n in numbers:
        name, _, size = chunks[n]
        zipped = listed.get(name, probed.get(n))
        if zipped is not None:
            out[n] = (_file(raws[n], size), _file(name, zipped))
        elif _has_size(read, listed, raws[n], size):  # litdata decompressed it in place
            out[n] = (_file(raws[n], size), None)
        else:
            raise IndexFormatError(f'{where}: chunk {n}, {name}, is missing (and no decompressed {raws[n]} of '
                                   f'{size} bytes is beside it); the dataset is incomplete.')
    return out


def _has_size(read: Read | None, listed: dict[str, int], name: str, size: int) -> bool:
    """Whether the file ``name`` exists with ``size`` bytes."""
    if name in listed:
        return listed[name] == size
    if read is None or size <= 0:
        return False
    try:
        return len(read(name, size - 1, 2)) == 1
    except FileNotFoundError:
        return False


def checked_columns(columns: Sequence[str], spec_text: Any, where: str) -> list[str]:
    """``columns`` as a list, when each is a top-level key of the items ``spec_text`` (litdata's ``data_spec``)
    describes.

    Raises:
        IndexFormatError: the items are not dicts, or a key they lack (naming it and the keys there are).
    """
    spec = parse_spec(spec_text if isinstance(spec_text, str) else None, where)
    keys = top_level_keys(spec)
    if keys is None:
        kind = 'a single value' if spec is None or spec[0] is None else f'a {spec[0].rsplit(".", 1)[-1]}'
        raise UnknownColumnError(f'columns={list(columns)!r}: the items of {where} are not dicts (each is {kind}), so '
                                 f'they have no keys to keep. Remove `columns` for this stream.')
    missing = [name for name in columns if name not in keys]
    if missing:
        raise UnknownColumnError(f'columns={list(columns)!r}: the items of {where} have no key '
                                 f'{", ".join(repr(name) for name in missing)}; their keys are {keys}.')
    return list(columns)


def convert_index(data: bytes, where: str, read: Read | None = None, files: Sequence[Any] = (),
                  window: int = WINDOW, columns: Sequence[str] | None = None) -> dict[str, Any]:
    """Our index (``{'shards': [...], 'version': 2}``) from the bytes of litdata's ``index.json``.

    Args:
        data: The file's bytes.
        where: The file, for messages.
        read: ``read(name, start, length) -> bytes`` over the dataset's directory: finds the compressed sizes of
            whole-file zstd chunks missing from ``files`` (see :mod:`streaming_litdata.sizes`).
        files: Listed files of the directory (``.name``, ``.size``): the sizes of compressed chunks among them are
            taken from here.
        window: The bisection window of the size probes (:func:`streaming_litdata.sizes.window_for`).
        columns: Keep only these top-level keys of each item (see :func:`checked_columns`).

    Raises:
        IndexFormatError: not a litdata index, a feature this plugin does not read (named), a compressed chunk
            that is missing or whose size cannot be learnt (no ``read``), or a key of ``columns`` the items lack.
    """
    try:
        obj = json.loads(data)
    except ValueError as err:
        raise IndexFormatError(f'{where} is not valid JSON ({err}).') from None
    if not is_litdata_index(obj):
        raise IndexFormatError(f'{where} is not a litdata index (no "chunks" and "config").')
    config = obj['config']
    _refuse(config, where)
    wrap = in_file_compression(config, where)
    formats = config.get('data_format')
    if not isinstance(formats, list):
        raise IndexFormatError(f'{where}: "config.data_format" must be a list, got {formats!r}.')
    chunks = []
    for number, chunk in enumerate(obj['chunks']):
        name = chunk.get('filename') if isinstance(chunk, dict) else None
        count = chunk.get('chunk_size') if isinstance(chunk, dict) else None
        size = chunk.get('chunk_bytes') if isinstance(chunk, dict) else None
        if not isinstance(name, str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, size)):
            raise IndexFormatError(f'{where}: chunk {number} needs "filename", "chunk_size" and "chunk_bytes", got '
                                   f'{chunk!r}.')
        chunks.append((name, count, size))
    kept = checked_columns(columns, config.get('data_spec'), where) if columns is not None else None
    suffix = whole_file_suffix(config)
    whole = {}
    if suffix is not None:
        listed = {item.name: int(item.size) for item in files if getattr(item, 'size', None) is not None}
        whole = _whole_file_entries(chunks, suffix, read, listed, where, window)
    shards = []
    for number, (name, count, size) in enumerate(chunks):
        raw, zipped = whole.get(number, (_file(name, size), None))
        shards.append({'format': 'litdata', 'version': 2, 'samples': count,
                       'compression': 'zstd' if zipped is not None else None, 'hashes': [], 'size_limit': None,
                       'zip_data': zipped, 'raw_data': raw, 'data_format': list(formats),
                       'data_spec': config.get('data_spec'), 'in_file_compression': wrap, 'columns': kept})
    return {'shards': shards, 'version': 2}


class LitdataIndexBuilder:
    """Indexes a directory written by litdata's ``optimize``/``BinaryWriter`` from its ``index.json``.

    The core hands it a directory whose ``index.json`` it claims (:meth:`claims_index`: litdata's ``chunks`` and
    ``config``, no ``shards``); ``patterns`` is empty, so a directory *without* an ``index.json`` is never detected
    as litdata (a parent of nested datasets' ``index.json`` files stays one). :func:`convert_index` is the same
    conversion for tools.

    The core hands a foreign ``index.json``'s builder that file alone, not a listing of the directory, so the sizes of
    whole-file zstd chunks are found with ranged reads (:mod:`streaming_litdata.sizes`: a few small reads per chunk,
    or one whole read where the storage has no ranged reads), once per node and ``index.json`` version (the derived
    index is kept); listed files, when ``files`` holds them, are used instead.

    Args:
        columns: Keep only these top-level keys of each item (``None``: whole items); see the module docstring.
    """

    patterns: tuple[str, ...] = ()
    #: The ``format_options`` this builder takes (``Stream(columns=[...])``).
    option_names = ('columns',)

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        self.columns = columns_option({'columns': columns})

    @property
    def name(self) -> str:
        """``litdata``, or ``litdata[columns=...]`` with a projection."""
        return 'litdata' if self.columns is None else f'litdata[columns={",".join(self.columns)}]'

    def configure(self, options: Mapping[str, Any]) -> LitdataIndexBuilder:
        """The builder with a stream's format options (names among :attr:`option_names`; the core checks them).

        Raises:
            ValueError: ``columns`` is not a non-empty list of distinct names.
        """
        return LitdataIndexBuilder(columns_option(options))

    def claims_index(self, obj: Any) -> bool:
        """Whether the parsed ``index.json`` ``obj`` is litdata's (see :func:`is_litdata_index`)."""
        return is_litdata_index(obj)

    def build(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *, where: str) -> dict[str, Any]:
        """Read ``index.json`` and convert it (``read`` also finds the sizes of whole-file zstd chunks).

        Raises:
            IndexFormatError: see :func:`convert_index`.
        """
        index = [item for item in files if item.name == INDEX_NAME]
        if not index:
            raise IndexFormatError(f'{where} has no litdata index.json.')
        return convert_index(read(INDEX_NAME, 0, index[0].size), f'{where}/{INDEX_NAME}', read, files,
                             window_for(where), self.columns)
