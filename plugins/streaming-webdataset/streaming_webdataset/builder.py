"""The ``webdataset`` index builder: one index entry per ``.tar``, from its headers or from a sidecar index.

Planning needs every tar's sample count before the first step, and tar headers are chained (each header says where
the next one is), so indexing a tar walks its headers. Remote tars are walked with ranged reads batched into windows
(:class:`~streaming_webdataset.tarscan.WindowedReader`): a tar of small members (images, labels) costs about one
download of the file, in a few large requests; the data of large members (videos) is skipped. Eight tars are walked
at a time, once per node; the result is cached like every derived index.

A sidecar index, ``webdataset-index.json`` in the directory (written by ``streaming index DIR``), skips the walk: it
is a wids shard index (``{"__kind__": "wids-shard-index-v1", "shardlist": [{"url", "nsamples", ...}]}``), so a wids
index of the same tars works too. Each row is used only when its ``url`` names a listed tar and its ``filesize``
(when present) matches the listing; other tars are walked. A tar rewritten with the same size is caught when it is
opened (its sample count is checked against the index).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming_core.plugin_api import IndexFormatError
from streaming_webdataset.gzipped import gunzip_bytes, is_gzipped
from streaming_webdataset.reader import field_kind
from streaming_webdataset.tarscan import WindowedReader, group_samples, iter_members

__all__ = ['WebDatasetIndexBuilder', 'SIDECAR', 'WIDS_KIND', 'entry_for', 'scan_tar', 'sidecar_json',
           'read_sidecar']

logger = logging.getLogger('streaming_webdataset')

#: The sidecar index's file name, next to the tars.
SIDECAR = 'webdataset-index.json'
#: The ``__kind__`` of a wids shard index.
WIDS_KIND = 'wids-shard-index-v1'
_THREADS = 8

Read = Callable[[str, int, int], bytes]


def _columns(fields: dict[str, None]) -> list[list[str]]:
    return [[field, field_kind(field)] for field in fields]


def _fields(samples: Sequence[Any]) -> dict[str, None]:
    fields: dict[str, None] = {}
    for sample in samples:
        for field, _, _ in sample.fields:
            fields.setdefault(field, None)
    return fields


def entry_for(name: str, size: int, samples: int, columns: list[list[str]]) -> dict[str, Any]:
    """The ``webdataset`` index entry of one tar."""
    return {'format': 'webdataset', 'version': 2, 'samples': int(samples), 'compression': None, 'hashes': [],
            'size_limit': None, 'zip_data': None, 'raw_data': {'basename': name, 'bytes': int(size), 'hashes': {}},
            'columns': columns}


def scan_tar(name: str, size: int, read: Read, where: str) -> tuple[int, list[list[str]]]:
    """``(sample count, [[field, kind], ...])`` of one tar, from its headers read with ranged reads.

    Raises:
        ShardCorruptError: the tar is damaged (naming it and the member).
        TarLayoutError: the tar is not in WebDataset layout (naming it and the member).
    """
    shown = f'{where}/{name}'
    if is_gzipped(name):  # no ranged reads into gzip: the whole file, decompressed (bounded) in memory
        plain = gunzip_bytes(read(name, 0, size), shown)
        samples = group_samples(iter_members(lambda start, length: plain[start:start + length], len(plain), shown),
                                shown)
        logger.debug('indexed %s: %d samples from %d compressed bytes', shown, len(samples), size)
        return len(samples), _columns(_fields(samples))
    window = WindowedReader(read, name, size)
    samples = group_samples(iter_members(window, size, shown), shown)
    logger.debug('indexed %s/%s: %d samples in %d requests (%d of %d bytes)', where, name, len(samples),
                 window.requests, window.fetched, size)
    return len(samples), _columns(_fields(samples))


def read_sidecar(data: bytes, shown: str) -> dict[str, dict[str, Any]]:
    """The rows of a sidecar (wids) index by ``url``.

    Raises:
        IndexFormatError: not a wids shard index, or a malformed row (naming the file).
    """
    try:
        obj = json.loads(data)
    except ValueError as err:
        raise IndexFormatError(f'{shown} is not valid JSON ({err}); remove it or write it again with "streaming '
                               f'index".') from None
    rows = obj.get('shardlist') if isinstance(obj, dict) else None
    if not isinstance(rows, list) or obj.get('__kind__', WIDS_KIND) != WIDS_KIND:
        raise IndexFormatError(f'{shown} is not a wids shard index ({{"__kind__": "{WIDS_KIND}", "shardlist": '
                               f'[...]}}); remove it or write it again with "streaming index".')
    found: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(rows):
        url = row.get('url') if isinstance(row, dict) else None
        count = row.get('nsamples') if isinstance(row, dict) else None
        if not isinstance(url, str) or not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise IndexFormatError(f'{shown}: shardlist row {number} needs a "url" and a non-negative "nsamples", '
                                   f'got {row!r}.')
        found[url] = row
    return found


def sidecar_json(entries: Sequence[dict[str, Any]], name: str) -> bytes:
    """The sidecar index of ``entries`` (a wids shard index with each tar's size and fields)."""
    rows = [{'url': e['raw_data']['basename'], 'nsamples': e['samples'], 'filesize': e['raw_data']['bytes'],
             'columns': e['columns']} for e in entries]
    obj = {'__kind__': WIDS_KIND, 'wids_version': 1, 'name': name, 'shardlist': rows}
    return (json.dumps(obj, indent=1) + '\n').encode('utf-8')


def _from_row(row: dict[str, Any]) -> list[list[str]]:
    columns = row.get('columns')
    if isinstance(columns, list) and all(isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c)
                                         for c in columns):
        return columns
    return []


class WebDatasetIndexBuilder:
    """Indexes ``*.tar`` files in WebDataset layout: one ``webdataset`` shard entry per tar."""

    name = 'webdataset'
    patterns = ('*.tar', '*.tar.gz', '*.tgz', SIDECAR)
    #: The file ``streaming index`` writes (see :meth:`sidecar`).
    sidecar_name = SIDECAR

    def _scan_all(self, tars: Sequence[Any], read: Read, where: str) -> list[tuple[int, list[list[str]]]]:
        if len(tars) <= 1:
            return [scan_tar(item.name, item.size, read, where) for item in tars]
        with ThreadPoolExecutor(max_workers=min(_THREADS, len(tars))) as pool:
            return list(pool.map(lambda item: scan_tar(item.name, item.size, read, where), tars))

    def build(self, files: Sequence[Any], read: Read, *, where: str) -> dict[str, Any]:
        """Index the tars, from the sidecar index where it covers them, else from their headers.

        Raises:
            ShardCorruptError: a damaged tar (naming it and the member).
            TarLayoutError: a tar not in WebDataset layout (naming it and the member).
            IndexFormatError: a malformed sidecar index.
        """
        tars = [item for item in files if item.name != SIDECAR]
        sidecar = [item for item in files if item.name == SIDECAR]
        rows: dict[str, dict[str, Any]] = {}
        if sidecar:
            rows = read_sidecar(read(SIDECAR, 0, sidecar[0].size), f'{where}/{SIDECAR}')
        known: dict[str, tuple[int, list[list[str]]]] = {}
        for item in tars:
            row = rows.get(item.name)
            if row is None:
                continue
            size = row.get('filesize')
            if size is not None and size != item.size:
                logger.warning('%s/%s: %s gives %s bytes but the tar has %d; indexing it from its headers (run '
                               '"streaming index %s" to refresh the sidecar).', where, item.name, SIDECAR, size,
                               item.size, where)
                continue
            known[item.name] = (row['nsamples'], _from_row(row))
        missing = [item for item in tars if item.name not in known]
        if sidecar and missing:
            logger.info('%s/%s does not cover %d tar(s); indexing them from their headers', where, SIDECAR,
                        len(missing))
        for item, result in zip(missing, self._scan_all(missing, read, where)):
            known[item.name] = result
        return {'shards': [entry_for(item.name, item.size, *known[item.name]) for item in tars], 'version': 2}

    def sidecar(self, files: Sequence[Any], read: Read, *, where: str) -> tuple[str, bytes]:
        """``(file name, bytes)`` of a fresh sidecar index of the tars among ``files`` (every tar walked, an
        existing sidecar ignored), for ``streaming index``.

        Raises:
            IndexFormatError: no tar among ``files``.
        """
        tars = [item for item in files if item.name != SIDECAR]
        if not tars:
            raise IndexFormatError(f'{where} has no .tar, .tar.gz or .tgz file to index.')
        entries = [entry_for(item.name, item.size, count, columns)
                   for item, (count, columns) in zip(tars, self._scan_all(tars, read, where))]
        return SIDECAR, sidecar_json(entries, where.rstrip('/').rsplit('/', 1)[-1])
