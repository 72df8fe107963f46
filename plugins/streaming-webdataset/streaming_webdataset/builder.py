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

A gzip-compressed tar (``.tar.gz``, ``.tgz``) is indexed whole-file (downloaded and decompressed, bounded) and
described as a compressed shard (``compression: 'gz'``, see :mod:`streaming_webdataset.gzipped`), whose entry
needs the decompressed size: the sidecar records it per row as ``uncompressed_size``; a row of a compressed tar
without it (a wids index, or a sidecar written before it was recorded) is not enough, and that tar is walked.

``columns=[...]`` (the stream's ``columns`` format option, handed to :meth:`WebDatasetIndexBuilder.configure`) keeps
only those fields (``jpg``, ``cls``, ``seg.png``...; ``__key__`` and ``__url__`` always stay): each entry records
the projection (``projection``) and lists only the kept fields it has, and the reader reads no other member. A
field no tar has is refused when the index is built, naming the directory, the field and the fields there are; a
sidecar row that does not record its tar's fields (a wids index) is then not enough, and that tar is walked.
"""

from __future__ import annotations

import json
import logging
import mmap
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError, UnknownColumnError, columns_option
from streaming_webdataset.gzipped import COMPRESSION, READ_CHUNK, gunzip, is_gzipped, plain_name
from streaming_webdataset.reader import field_kind
from streaming_webdataset.tarscan import WindowedReader, group_samples, iter_members

__all__ = ['WebDatasetIndexBuilder', 'SIDECAR', 'WIDS_KIND', 'ALWAYS_KEPT', 'entry_for', 'scan_tar', 'sidecar_json',
           'read_sidecar', 'project_entries']

logger = logging.getLogger('streaming_webdataset')

#: The sidecar index's file name, next to the tars.
SIDECAR = 'webdataset-index.json'
#: The ``__kind__`` of a wids shard index.
WIDS_KIND = 'wids-shard-index-v1'
_THREADS = 8
#: The items every sample has, whatever the projection (naming them in ``columns`` is allowed and changes nothing).
ALWAYS_KEPT = ('__key__', '__url__')

Read = Callable[[str, int, int], bytes]
#: ``(sample count, [[field, kind], ...], decompressed size)`` of one tar.
Scan = tuple[int, list[list[str]], int]


def _columns(fields: dict[str, None]) -> list[list[str]]:
    return [[field, field_kind(field)] for field in fields]


def _fields(samples: Sequence[Any]) -> dict[str, None]:
    fields: dict[str, None] = {}
    for sample in samples:
        for field, _, _ in sample.fields:
            fields.setdefault(field, None)
    return fields


def entry_for(name: str, size: int, samples: int, columns: list[list[str]], *, raw_size: int | None = None,
              raw_name: str | None = None) -> dict[str, Any]:
    """The ``webdataset`` index entry of one tar.

    A plain tar is its own raw file. A gzip-compressed tar (``raw_name`` given, with ``raw_size``, the size it
    decompresses to) is a compressed shard: ``zip_data`` is the ``.tar.gz``, ``raw_data`` the plain tar the core
    decompresses it into (named by :func:`~streaming_webdataset.gzipped.plain_name`).
    """
    if raw_name is None:
        return {'format': 'webdataset', 'version': 2, 'samples': int(samples), 'compression': None, 'hashes': [],
                'size_limit': None, 'zip_data': None,
                'raw_data': {'basename': name, 'bytes': int(size), 'hashes': {}}, 'columns': columns}
    if raw_size is None:
        raise ValueError(f'{name}: a compressed tar\'s entry needs its decompressed size.')
    return {'format': 'webdataset', 'version': 2, 'samples': int(samples), 'compression': COMPRESSION, 'hashes': [],
            'size_limit': None, 'zip_data': {'basename': name, 'bytes': int(size), 'hashes': {}},
            'raw_data': {'basename': raw_name, 'bytes': int(raw_size), 'hashes': {}}, 'columns': columns}


def _entry(item: Any, scan: Scan) -> dict[str, Any]:
    count, columns, raw_size = scan
    if is_gzipped(item.name):
        return entry_for(item.name, item.size, count, columns, raw_size=raw_size, raw_name=plain_name(item))
    return entry_for(item.name, item.size, count, columns)


def _scan_gzipped(name: str, size: int, read: Read, shown: str) -> Scan:
    """Read the compressed tar in ranged reads of :data:`READ_CHUNK` bytes, decompress it (bounded) into a temporary
    file and walk the plain tar through a memory map (so neither copy is held in memory)."""
    chunks = (read(name, start, min(READ_CHUNK, size - start)) for start in range(0, size, READ_CHUNK))
    with tempfile.TemporaryFile(prefix='wds-gunzip-') as plain:
        total = gunzip(chunks, plain.write, shown)
        plain.flush()
        if total == 0:
            raise ShardCorruptError(f'{shown} decompresses to nothing; it is not a tar.')
        with mmap.mmap(plain.fileno(), 0, access=mmap.ACCESS_READ) as mapping:
            samples = group_samples(iter_members(lambda start, length: mapping[start:start + length], total, shown),
                                    shown)
    logger.debug('indexed %s: %d samples, %d bytes decompressed from %d', shown, len(samples), total, size)
    return len(samples), _columns(_fields(samples)), total


def scan_tar(name: str, size: int, read: Read, where: str) -> Scan:
    """``(sample count, [[field, kind], ...], decompressed size)`` of one tar, from its headers read with ranged
    reads (a compressed tar: read whole and decompressed, see :func:`_scan_gzipped`).

    Raises:
        ShardCorruptError: the tar is damaged, or its gzip data is (naming it and the member).
        TarLayoutError: the tar is not in WebDataset layout (naming it and the member).
    """
    shown = f'{where}/{name}'
    if is_gzipped(name):  # no ranged reads into gzip: the whole file, decompressed
        return _scan_gzipped(name, size, read, shown)
    window = WindowedReader(read, name, size)
    samples = group_samples(iter_members(window, size, shown), shown)
    logger.debug('indexed %s/%s: %d samples in %d requests (%d of %d bytes)', where, name, len(samples),
                 window.requests, window.fetched, size)
    return len(samples), _columns(_fields(samples)), size


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
    """The sidecar index of ``entries`` (a wids shard index with each tar's size and fields, and for a compressed
    tar the size it decompresses to, ``uncompressed_size``)."""
    rows = []
    for e in entries:
        stored = e['zip_data'] or e['raw_data']
        row = {'url': stored['basename'], 'nsamples': e['samples'], 'filesize': stored['bytes']}
        if e['zip_data'] is not None:
            row['uncompressed_size'] = e['raw_data']['bytes']
        row['columns'] = e['columns']
        rows.append(row)
    obj = {'__kind__': WIDS_KIND, 'wids_version': 1, 'name': name, 'shardlist': rows}
    return (json.dumps(obj, indent=1) + '\n').encode('utf-8')


def _row_columns(row: dict[str, Any]) -> list[list[str]] | None:
    """The ``[[field, kind], ...]`` a sidecar row records, or None when it records none (a wids index)."""
    columns = row.get('columns')
    if isinstance(columns, list) and all(isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c)
                                         for c in columns):
        return columns
    return None


def project_entries(entries: Sequence[dict[str, Any]], columns: Sequence[str], where: str) -> None:
    """Project ``entries`` (in place) to the fields ``columns``: each records ``projection`` (the fields asked for,
    in order, without ``__key__``/``__url__``) and lists only the kept fields it has, in that order.

    Raises:
        IndexFormatError: a field no entry has, naming ``where``, the field and the fields there are.
    """
    present: dict[str, None] = {}
    for entry in entries:
        for field, _ in entry['columns']:
            present.setdefault(field, None)
    wanted = [name for name in columns if name not in ALWAYS_KEPT]
    missing = [name for name in wanted if name not in present]
    if missing:
        raise UnknownColumnError(f'columns={list(columns)!r}: no sample of the WebDataset tars in {where} has the '
                                 f'field {", ".join(repr(name) for name in missing)}; the fields there are '
                                 f'{list(present)} (and {", ".join(ALWAYS_KEPT)}, always kept). A field is a '
                                 f'member\'s extension (x.jpg is field jpg of sample x).')
    for entry in entries:
        kinds = dict((field, kind) for field, kind in entry['columns'])
        entry['columns'] = [[name, kinds[name]] for name in wanted if name in kinds]
        entry['projection'] = list(wanted)


class WebDatasetIndexBuilder:
    """Indexes ``*.tar`` files in WebDataset layout: one ``webdataset`` shard entry per tar.

    Args:
        columns: Keep only these fields (``None``: every field); see the module docstring.
    """

    patterns = ('*.tar', '*.tar.gz', '*.tgz', SIDECAR)
    #: The file ``streaming index`` writes (see :meth:`sidecar`).
    sidecar_name = SIDECAR
    #: The ``format_options`` this builder takes (``Stream(columns=[...])``).
    option_names = ('columns',)

    def __init__(self, columns: Sequence[str] | None = None) -> None:
        self.columns = columns_option({'columns': columns})

    @property
    def name(self) -> str:
        """``webdataset``, or ``webdataset[columns=...]`` with a projection."""
        return 'webdataset' if self.columns is None else f'webdataset[columns={",".join(self.columns)}]'

    def configure(self, options: Mapping[str, Any]) -> WebDatasetIndexBuilder:
        """The builder with a stream's format options (names among :attr:`option_names`; the core checks them).

        Raises:
            ValueError: ``columns`` is not a non-empty list of distinct names.
        """
        return WebDatasetIndexBuilder(columns_option(options))

    def _scan_all(self, tars: Sequence[Any], read: Read, where: str) -> list[Scan]:
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
        tars = [item for item in files if item.name.rsplit('/', 1)[-1] != SIDECAR]  # a subdirectory's is no tar
        sidecar = [item for item in files if item.name == SIDECAR]
        rows: dict[str, dict[str, Any]] = {}
        if sidecar:
            rows = read_sidecar(read(SIDECAR, 0, sidecar[0].size), f'{where}/{SIDECAR}')
        known: dict[str, Scan] = {}
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
            raw_size = item.size
            if is_gzipped(item.name):
                raw_size = row.get('uncompressed_size')
                if not isinstance(raw_size, int) or isinstance(raw_size, bool) or raw_size <= 0:
                    logger.info('%s/%s: %s does not record its uncompressed_size; indexing it whole-file (run '
                                '"streaming index %s" to record it).', where, item.name, SIDECAR, where)
                    continue
            recorded = _row_columns(row)
            if recorded is None and self.columns is not None:
                continue  # a projection is checked against every tar's fields: walk it to learn them
            known[item.name] = (row['nsamples'], recorded or [], raw_size)
        missing = [item for item in tars if item.name not in known]
        if sidecar and missing:
            logger.info('%s/%s does not cover %d tar(s); indexing them from their headers', where, SIDECAR,
                        len(missing))
        for item, result in zip(missing, self._scan_all(missing, read, where)):
            known[item.name] = result
        entries = [_entry(item, known[item.name]) for item in tars]
        if self.columns is not None:
            project_entries(entries, self.columns, where)
        return {'shards': entries, 'version': 2}

    def sidecar(self, files: Sequence[Any], read: Read, *, where: str) -> tuple[str, bytes]:
        """``(file name, bytes)`` of a fresh sidecar index of the tars among ``files`` (every tar walked, an
        existing sidecar ignored), for ``streaming index``.

        Raises:
            IndexFormatError: no tar among ``files``.
        """
        tars = [item for item in files if item.name.rsplit('/', 1)[-1] != SIDECAR]  # a subdirectory's is no tar
        if not tars:
            raise IndexFormatError(f'{where} has no .tar, .tar.gz or .tgz file to index.')
        entries = [_entry(item, scan) for item, scan in zip(tars, self._scan_all(tars, read, where))]
        return SIDECAR, sidecar_json(entries, where.rstrip('/').rsplit('/', 1)[-1])
