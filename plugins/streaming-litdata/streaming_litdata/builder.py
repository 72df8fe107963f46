"""litdata's ``index.json`` (``{"chunks": [...], "config": {...}}``) as a streaming-core index: one ``litdata``
entry per chunk file.

Features litdata can write that this plugin does not read are refused by name, never misread: encryption, whole-file
zstd chunks (``.zstd.bin``) and other codecs, Arrow IPC compression, item loaders other than the default
``PyTreeLoader`` (token and temporal loaders), and data formats :mod:`streaming_litdata.decode` does not decode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from streaming_core.plugin_api import IndexFormatError

__all__ = ['LitdataIndexBuilder', 'convert_index', 'in_file_compression', 'is_litdata_index', 'INDEX_NAME']

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
    ``compression="zstd"``), ``'sample'`` (one zstd frame per item) or None (not compressed).

    Raises:
        IndexFormatError: whole-file zstd chunks (``.zstd.bin``, ``compression_level="chunk"``), refused by name.
    """
    if not config.get('compression'):
        return None
    level = config.get('compression_level') or 'chunk'
    if level in ('batch', 'sample'):
        return str(level)
    raise IndexFormatError(f'{where}: the dataset uses litdata compression={config["compression"]!r} with '
                           f'compression_level={level!r}: whole-file zstd chunks (.zstd.bin), whose compressed sizes '
                           f'index.json does not record, are not read. Write it with compression_level="batch" (the '
                           f'default of compression="zstd") or "sample", or convert it with litdata.')


def convert_index(data: bytes, where: str) -> dict[str, Any]:
    """Our index (``{'shards': [...], 'version': 2}``) from the bytes of litdata's ``index.json``.

    Args:
        data: The file's bytes.
        where: The file, for messages.

    Raises:
        IndexFormatError: not a litdata index, or a feature this plugin does not read (named).
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
    shards = []
    for number, chunk in enumerate(obj['chunks']):
        name = chunk.get('filename') if isinstance(chunk, dict) else None
        count = chunk.get('chunk_size') if isinstance(chunk, dict) else None
        size = chunk.get('chunk_bytes') if isinstance(chunk, dict) else None
        if not isinstance(name, str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in (count, size)):
            raise IndexFormatError(f'{where}: chunk {number} needs "filename", "chunk_size" and "chunk_bytes", got '
                                   f'{chunk!r}.')
        shards.append({'format': 'litdata', 'version': 2, 'samples': count, 'compression': None, 'hashes': [],
                       'size_limit': None, 'zip_data': None,
                       'raw_data': {'basename': name, 'bytes': size, 'hashes': {}},
                       'data_format': list(formats), 'data_spec': config.get('data_spec'),
                       'in_file_compression': wrap})
    return {'shards': shards, 'version': 2}


class LitdataIndexBuilder:
    """Indexes a directory written by litdata's ``optimize``/``BinaryWriter`` from its ``index.json``.

    The core hands it a directory whose ``index.json`` it claims (:meth:`claims_index`: litdata's ``chunks`` and
    ``config``, no ``shards``); ``patterns`` is empty, so a directory *without* an ``index.json`` is never detected
    as litdata (a parent of nested datasets' ``index.json`` files stays one). :func:`convert_index` is the same
    conversion for tools.
    """

    name = 'litdata'
    patterns: tuple[str, ...] = ()

    def claims_index(self, obj: Any) -> bool:
        """Whether the parsed ``index.json`` ``obj`` is litdata's (see :func:`is_litdata_index`)."""
        return is_litdata_index(obj)

    def build(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *, where: str) -> dict[str, Any]:
        """Read ``index.json`` and convert it.

        Raises:
            IndexFormatError: see :func:`convert_index`.
        """
        index = [item for item in files if item.name == INDEX_NAME]
        if not index:
            raise IndexFormatError(f'{where} has no litdata index.json.')
        return convert_index(read(INDEX_NAME, 0, index[0].size), f'{where}/{INDEX_NAME}')
