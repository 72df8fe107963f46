"""The ``parquet`` index builder: one index entry (a *unit*) per row group, from each file's footer read with
ranged reads.

A unit is what shuffles, partitions, batching, resumption and the cache's pins work on; the units of one file name
that file (the same ``raw_data``) and follow each other in the index, so the core downloads, counts and evicts the
file once for all of them (the ``parquet`` format declares ``units_share_files``). Empty row groups make no unit.

For each file, the last 64 KiB (or the whole file when smaller) are read in one request, 32 files at a time; a
footer longer than that costs a second request for exactly its bytes. The footer gives the schema, the row groups
and their row counts; the data pages are never read, so indexing 1,000 remote files downloads kilobytes per file.
Every file must have the first file's columns with the same types (in any order): otherwise the error names the file
and the column.

A builder may be configured (:class:`ParquetIndexBuilder` arguments, given as a stream's ``format_options`` /
``columns=``, which the core hands to :meth:`ParquetIndexBuilder.configure`): ``columns`` projects the index to
those columns (the reader then decodes only their column chunks), ``split`` / ``config`` / ``data_files`` select
files by the Hugging Face conventions or glob patterns (:mod:`streaming_parquet.selection`), ``decode_images``
records the Hugging Face image columns to decode to PIL images.

A sidecar index, ``parquet-index.json`` beside the files (written by ``streaming index DIR``, see
:mod:`streaming_parquet.sidecar`), gives every file's row groups and columns in one read: only the files it does not
describe (added or replaced since) have their footers read.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError, UnknownColumnError
from streaming_parquet.selection import describe_selection, select_names
from streaming_parquet.sidecar import SIDECAR, Summary, read_sidecar, sidecar_json, summary_of, usable_row

__all__ = ['ParquetIndexBuilder', 'read_footer', 'footer_span', 'entries_for', 'image_columns',
           'require_pillow', 'FOOTER_PROBE', 'MAGIC', 'INDEX_VERSION']

logger = logging.getLogger('streaming_parquet')

#: The bytes read from the end of each file first (most footers fit).
FOOTER_PROBE = 64 << 10
#: The Parquet magic number, at the start and the end of every file.
MAGIC = b'PAR1'
#: Footers read at once. Each read is a round trip or two (the Hub answers a ``resolve`` with a redirect to its
#: CDN), so on a real network the reads wait, not compute: with 20 ms per answer, 1,000 footers took 6.0 s 8 at a
#: time, 3.3 s 16 at a time, 2.0-2.4 s 32 at a time; on loopback, where the reads compute, 8, 16 and 32 at a time
#: were within the noise of a busy machine (0.8-1.8 s).
_THREADS = 32
#: From this many footers read without a sidecar, the build logs how to write one.
SIDECAR_HINT_FILES = 100
#: The layout of the index this builder writes (part of the derived index's identity): 2 = one unit per row group
#: (1 was one entry per file). An index kept under another layout is rebuilt, never read.
INDEX_VERSION = 2


def require_pillow() -> Any:
    """``PIL.Image``, for ``decode_images=True``.

    Raises:
        ImportError: naming the extra to install, when pillow is missing.
    """
    try:
        from PIL import Image
    except ImportError as err:
        raise ImportError(f"decode_images=True needs pillow, which is not installed ({err}): pip install "
                          f"'streaming-parquet[images]' (or pip install pillow), or leave decode_images out to get "
                          f"each image as its {{'bytes', 'path'}} dict.") from err
    return Image


def footer_span(end: bytes, size: int) -> tuple[int, int] | None:
    """``(start, length)`` of the whole footer of a Parquet file of ``size`` bytes whose last 8 bytes are ``end``,
    with the 4 KiB before it and the footer's length and magic number (None when ``end`` is no Parquet ending)."""
    if len(end) != 8 or end[4:] != MAGIC:
        return None
    footer = int.from_bytes(end[:4], 'little') + 8
    if footer > size:
        return None
    start = max(size - footer - 4096, 0)
    return start, size - start


def read_footer(name: str, size: int, read: Callable[[str, int, int], bytes], where: str) -> Any:
    """The ``pyarrow.parquet.FileMetaData`` of one file, from ranged reads of its end.

    Raises:
        ShardCorruptError: naming the file, when it is too short, lacks the magic number or its footer is unreadable.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    shown = f'{where}/{name}'
    if size < 12:
        raise ShardCorruptError(f'{shown} is not a Parquet file: {size} bytes, fewer than the 12 of an empty one '
                                f'(truncated?).')
    probe = min(size, FOOTER_PROBE)
    tail = read(name, size - probe, probe)
    if len(tail) != probe:
        raise ShardCorruptError(f'{shown}: read {len(tail)} of the last {probe} bytes of a {size}-byte file (the '
                                f'file changed or is truncated).')
    if tail[-4:] != MAGIC:
        raise ShardCorruptError(f'{shown} is not a Parquet file (or is truncated): it does not end with {MAGIC!r}.')
    (length,) = struct.unpack('<I', tail[-8:-4])
    if length + 12 > size:
        raise ShardCorruptError(f'{shown}: its footer claims {length} bytes, more than the file holds ({size}); the '
                                f'file is truncated or corrupt.')
    if length + 8 <= len(tail):
        footer = tail[len(tail) - 8 - length:]
    else:
        footer = read(name, size - 8 - length, length + 8)
        if len(footer) != length + 8:
            raise ShardCorruptError(f'{shown}: the footer read gave {len(footer)} of {length + 8} bytes.')
    try:
        return pq.read_metadata(pa.BufferReader(MAGIC + footer))
    except (pa.ArrowException, OSError, ValueError) as err:
        raise ShardCorruptError(f'{shown}: the Parquet footer cannot be read ({type(err).__name__}: {err}); the '
                                f'file is corrupt.') from None


def entries_for(name: str, size: int, row_groups: Sequence[int], columns: list[list[str]]) -> list[dict[str, Any]]:
    """The ``parquet`` index entries of one file (``row_groups``: every row group's row count, in file order): one
    unit per non-empty row group."""
    return [{'format': 'parquet', 'version': 2, 'samples': int(rows), 'compression': None, 'hashes': [],
             'size_limit': None, 'zip_data': None, 'raw_data': {'basename': name, 'bytes': int(size), 'hashes': {}},
             'columns': columns, 'row_group': group}
            for group, rows in enumerate(row_groups) if rows]


def _check_schema(first: Any, first_columns: list[list[str]], item: Any, columns: list[list[str]],
                  where: str, exact: bool = True) -> None:
    want = dict((name, kind) for name, kind in first_columns)
    have = dict((name, kind) for name, kind in columns)
    for name, kind in first_columns:
        if name not in have:
            raise IndexFormatError(f'Schema drift in {where}: {item.name} has no column {name!r}, which '
                                   f'{first.name} has ({kind}). Every Parquet file of a stream needs the same columns: '
                                   f'rewrite or move that file, or make it a separate stream.')
        if have[name] != kind:
            raise IndexFormatError(f'Schema drift in {where}: column {name!r} is {have[name]} in {item.name} but '
                                   f'{kind} in {first.name}. Every Parquet file of a stream needs the same column '
                                   f'types: rewrite or move that file, or make it a separate stream.')
    for name, kind in columns if exact else ():
        if name not in want:
            raise IndexFormatError(f'Schema drift in {where}: {item.name} has a column {name!r} ({kind}) that '
                                   f'{first.name} lacks. Every Parquet file of a stream needs the same columns.')


def image_columns(metadata: Any) -> list[str]:
    """The Hugging Face image columns of a file: declared ``Image`` in its ``huggingface`` schema metadata, or a
    ``struct<bytes: binary, path: string>`` column."""
    found = []
    features: Any = {}
    raw = (metadata.metadata or {}).get(b'huggingface')
    if raw:
        try:
            info = json.loads(raw)
            features = info.get('info', {}).get('features', {}) if isinstance(info, dict) else {}
        except ValueError:
            features = {}
    for field in metadata.schema.to_arrow_schema():
        declared = features.get(field.name) if isinstance(features, dict) else None
        if isinstance(declared, dict) and declared.get('_type') == 'Image':
            found.append(field.name)
        elif str(field.type) in ('struct<bytes: binary, path: string>', 'struct<path: string, bytes: binary>'):
            found.append(field.name)
    return found


def _is_sidecar(item: Any) -> bool:
    """Whether a listed file is a sidecar (the directory's own, or a subdirectory's, which is not data)."""
    return bool(item.name.rsplit('/', 1)[-1] == SIDECAR)


class ParquetIndexBuilder:
    """Indexes ``*.parquet`` files: one ``parquet`` unit per row group (see the module doc).

    Args:
        columns: Only these columns, in this order (default: every column of the files).
        split: A Hugging Face split name selecting files by the Hub's layouts (see :mod:`streaming_parquet.selection`).
        config: A Hugging Face configuration (a top directory) to restrict to.
        data_files: Glob patterns selecting files (a pattern, a list, or a ``{split: patterns}`` dict).
        decode_images: Decode the Hugging Face image columns (``{'bytes', 'path'}`` structs) to PIL images.
    """

    patterns = ('*.parquet', SIDECAR)
    #: The file ``streaming index`` writes (see :meth:`sidecar`).
    sidecar_name = SIDECAR
    #: The index layout (see :data:`INDEX_VERSION`): the core makes it part of the derived index's identity.
    index_version = INDEX_VERSION
    #: The ``format_options`` this builder takes (``Stream(format_options=...)``, ``columns=``).
    option_names = ('columns', 'split', 'config', 'data_files', 'decode_images')

    def __init__(self, *, columns: Sequence[str] | None = None, split: str | None = None, config: str | None = None,
                 data_files: str | Sequence[str] | Mapping[str, Any] | None = None,
                 decode_images: bool = False) -> None:
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) and c for c in columns) or not columns:
                raise ValueError(f'columns must be a non-empty list of column names, got {columns!r}.')
            if len(set(columns)) != len(columns):
                raise ValueError(f'columns lists a column twice: {list(columns)!r}.')
        self.columns = list(columns) if columns is not None else None
        self.split = split
        self.config = config
        self.data_files = data_files
        self.decode_images = bool(decode_images)

    def configure(self, options: Mapping[str, Any]) -> ParquetIndexBuilder:
        """A builder with a stream's format options (the core calls it with names among :attr:`option_names`).

        Raises:
            ValueError: a malformed value (``columns`` not a list of distinct names, ``split`` not a string...).
            ImportError: ``decode_images=True`` without pillow (naming the ``images`` extra).
        """
        options = dict(options)
        for key in ('split', 'config'):
            if options.get(key) is not None and (not isinstance(options[key], str) or not options[key]):
                raise ValueError(f'{key} must be a non-empty string, got {options[key]!r}.')
        if not isinstance(options.get('decode_images', False), bool):
            raise ValueError(f'decode_images must be True or False, got {options["decode_images"]!r}.')
        if options.get('decode_images'):
            require_pillow()  # missing pillow fails at construction, naming the extra
        return ParquetIndexBuilder(**options)

    @property
    def name(self) -> str:
        """``parquet``, or ``parquet[...]`` naming the configuration (part of the derived index's identity)."""
        parts = []
        if self.columns is not None:
            parts.append('columns=' + ','.join(self.columns))
        selection = describe_selection(self.split, self.config, self.data_files)
        if selection:
            parts.append(selection)
        if self.decode_images:
            parts.append('decode_images')
        return f'parquet[{";".join(parts)}]' if parts else 'parquet'

    @staticmethod
    def print_span(path: str, size: int) -> tuple[int, int] | None:
        """The byte range that identifies a local Parquet file's contents, hashed by the core to tell a rewrite its
        stat cannot show: its whole footer (the row groups' sizes, offsets and statistics; a file written without
        statistics may have the same footer as another of the same layout) and the 4 KiB of data before it (None
        when the file has no valid footer: the core then hashes its last bytes)."""
        try:
            with open(path, 'rb') as handle:
                return footer_span(os.pread(handle.fileno(), 8, max(size - 8, 0)), size)
        except OSError:
            return None

    def _project(self, first: Any, first_columns: list[list[str]], where: str) -> list[list[str]]:
        if self.columns is None:
            return first_columns
        kinds = dict((name, kind) for name, kind in first_columns)
        unknown = [name for name in self.columns if name not in kinds]
        if unknown:
            raise UnknownColumnError(f'columns={self.columns!r}: {where}/{first.name} has no column '
                                     f'{", ".join(repr(n) for n in unknown)}; its columns are '
                                     f'{[name for name, _ in first_columns]}.')
        return [[name, kinds[name]] for name in self.columns]

    def _summaries(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], where: str) -> list[Summary]:
        """Every file's summary from its footer, :data:`_THREADS` files at a time."""
        def one(item: Any) -> Summary:
            return summary_of(read_footer(item.name, item.size, read, where))
        if len(files) <= 1:
            return [one(item) for item in files]
        with ThreadPoolExecutor(max_workers=min(_THREADS, len(files))) as pool:
            return list(pool.map(one, files))

    def build(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *, where: str) -> dict[str, Any]:
        """Select the files and return the index, from the sidecar index where it describes a file, else from the
        file's footer (:data:`_THREADS` read at a time).

        Raises:
            FileSelectionError: ``split`` / ``data_files`` select no file.
            IndexFormatError: the files' schemas differ (naming the file and the column), or a malformed sidecar.
            UnknownColumnError: ``columns`` names a column the files lack (naming the file and its columns); a
                ``FormatOptionError`` and an ``IndexFormatError``.
            ShardCorruptError: a file is not a readable Parquet file (naming it).
        """
        sidecar = [item for item in files if item.name == SIDECAR]
        files = [item for item in files if not _is_sidecar(item)]
        if self.split is not None or self.config is not None or self.data_files is not None:
            chosen = set(select_names([item.name for item in files], split=self.split, config=self.config,
                                      data_files=self.data_files))
            files = [item for item in files if item.name in chosen]
        if not files:
            return {'shards': [], 'version': 2}
        rows = read_sidecar(read(SIDECAR, 0, sidecar[0].size), f'{where}/{SIDECAR}') if sidecar else {}
        known = {item.name: usable_row(rows.get(item.name), item) for item in files}
        missing = [item for item in files if known[item.name] is None]
        if sidecar and missing:
            logger.info('%s/%s does not describe %d of %d file(s) (added or replaced since it was written); reading '
                        'their footers. Run "streaming index %s" to refresh it.', where, SIDECAR, len(missing),
                        len(files), where)
        for item, summary in zip(missing, self._summaries(missing, read, where)):
            known[item.name] = summary
        if not sidecar and len(missing) >= SIDECAR_HINT_FILES:
            logger.info('%s: read the footers of %d files. Run "streaming index %s" to write %s beside them: a node '
                        'without this index then reads that one file instead.', where, len(missing), where, SIDECAR)
        summaries = [known[item.name] for item in files]
        for item, (_, layout, _) in zip(files, summaries):
            names = [name for name, _ in layout]
            twice = sorted({name for name in names if names.count(name) > 1
                            and (self.columns is None or name in self.columns)})
            if twice:  # pyarrow writes them; a row (a dict) cannot hold both (columns= may leave them out)
                raise IndexFormatError(f'{where}/{item.name} has several columns named {twice[0]!r}; a row cannot '
                                       f'hold them all. Rename them in the file, or read it with pyarrow.')
        columns = self._project(files[0], summaries[0][1], where)
        for item, (_, layout, _) in zip(files[1:], summaries[1:]):
            _check_schema(files[0], columns, item, layout, where, exact=self.columns is None)
        images = [name for name in summaries[0][2] if name in {c[0] for c in columns}]
        entries = [entry for item, (groups, _, _) in zip(files, summaries)
                   for entry in entries_for(item.name, item.size, groups, columns)]
        if self.decode_images and images:
            for entry in entries:
                entry['images'] = images
        return {'shards': entries, 'version': 2}

    def sidecar(self, files: Sequence[Any], read: Callable[[str, int, int], bytes], *,
                where: str) -> tuple[str, bytes]:
        """``(file name, bytes)`` of a fresh sidecar index of every Parquet file among ``files`` (every footer read,
        an existing sidecar ignored; no selection or projection applies), for ``streaming index``.

        Raises:
            IndexFormatError: no Parquet file among ``files``.
            ShardCorruptError: a file is not a readable Parquet file (naming it).
        """
        files = [item for item in files if not _is_sidecar(item)]
        if not files:
            raise IndexFormatError(f'{where} has no .parquet file to index.')
        return SIDECAR, sidecar_json(files, self._summaries(files, read, where))
