"""The ``webdataset`` shard format: one index entry per ``.tar`` (:class:`WebDatasetReader`) and an opened tar
(:class:`WebDatasetView`) whose samples are found by one walk of its headers through a memory map.

A sample comes out as WebDataset users know it: ``__key__`` (the sample key), ``__url__`` (the tar's name relative
to the dataset directory) and one item per member, keyed by its field (``jpg``, ``cls``, ``seg.png``...). Fields
ending in ``.json``/``.jsn`` are parsed JSON, ``.txt``/``.text``/``.transcript`` are ``str`` (UTF-8),
``.cls``/``.cls2``/``.class``/``.count``/``.index``/``.inx``/``.id`` are ``int``, as WebDataset's default decoders
give them (a value that is not an integer is ``None`` here, where WebDataset 1.0.2 raises ``DecodingError``); every
other field is ``bytes``. :func:`decode_sample` decodes more (NumPy arrays, images) in a ``transform``.

An entry with a ``projection`` (``Stream(columns=[...])``, see :mod:`streaming_webdataset.builder`) keeps only those
fields, in that order after ``__key__`` and ``__url__``: the other members' bytes are never read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError, ShardReaderBase, map_file
from streaming_webdataset.gzipped import COMPRESSION, is_gzipped, remove_stale_copies
from streaming_webdataset.tablecache import load_table, save_table
from streaming_webdataset.tarscan import Sample, group_samples, iter_members

__all__ = ['WebDatasetReader', 'WebDatasetView', 'WebDatasetFormat', 'decode_field', 'field_kind', 'decode_sample',
           'TEXT', 'INTEGER', 'JSON']

#: Field extensions decoded to ``str``, ``int`` and JSON values (WebDataset's default decoders).
TEXT = frozenset({'txt', 'text', 'transcript'})
INTEGER = frozenset({'cls', 'cls2', 'class', 'count', 'index', 'inx', 'id'})
JSON = frozenset({'json', 'jsn'})


def field_kind(field: str) -> str:
    """What a field decodes to: ``'str'``, ``'int'``, ``'json'`` or ``'bytes'`` (by its last extension)."""
    extension = field.rsplit('.', 1)[-1]
    if extension in TEXT:
        return 'str'
    if extension in INTEGER:
        return 'int'
    if extension in JSON:
        return 'json'
    return 'bytes'


def decode_field(field: str, data: bytes, where: str = '') -> Any:
    """One member's value as :class:`WebDatasetView` returns it (see the module docstring).

    Raises:
        ShardCorruptError: a JSON or text field that does not decode (naming ``where``).
    """
    kind = field_kind(field)
    if kind == 'bytes':
        return data
    if kind == 'int':
        try:
            return int(data)
        except ValueError:
            return None
    try:
        text = data.decode('utf-8')
        return text if kind == 'str' else json.loads(text)
    except ValueError as err:
        raise ShardCorruptError(f'{where}: the {field!r} field is not valid {"UTF-8 text" if kind == "str" else "JSON"}'
                                f' ({err}).') from None


def decode_sample(sample: Mapping[str, Any], kinds: Sequence[str] = ('npy', 'pil')) -> dict[str, Any]:
    """Decode more fields of a sample, for a ``transform``: ``'npy'`` (``.npy`` fields to NumPy arrays) and
    ``'pil'`` (``.jpg``/``.jpeg``/``.png``/``.webp``/``.bmp``/``.gif``/``.ppm`` fields to PIL images).

    Raises:
        ValueError: an unknown kind.
    """
    unknown = sorted(set(kinds) - {'npy', 'pil'})
    if unknown:
        raise ValueError(f'decode_sample kinds {unknown} are unknown; use "npy" and/or "pil".')
    out = dict(sample)
    for field, value in sample.items():
        if not isinstance(value, bytes):
            continue
        extension = field.rsplit('.', 1)[-1]
        if 'npy' in kinds and extension == 'npy':
            import io

            import numpy as np
            out[field] = np.load(io.BytesIO(value), allow_pickle=False)
        elif 'pil' in kinds and extension in ('jpg', 'jpeg', 'png', 'webp', 'bmp', 'gif', 'ppm'):
            import io

            from PIL import Image
            image = Image.open(io.BytesIO(value))
            image.load()
            out[field] = image
    return out


class WebDatasetReader(ShardReaderBase):
    """One ``webdataset`` index entry: one ``.tar`` file, its sample count and its fields (``[[field, kind]]``)."""

    format_name = 'webdataset'
    entry_keys = frozenset({'columns', 'compression', 'format', 'hashes', 'projection', 'raw_data', 'samples',
                            'size_limit', 'version', 'zip_data'})
    part_names = ('data',)
    # Every sample takes at least one 512-byte tar header in the raw (plain) tar, compressed or not.
    min_bytes_per_sample = 512

    def __init__(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> None:
        if isinstance(entry, Mapping) and 'projection' not in entry:  # no projection (and indexes derived before it)
            entry = {**entry, 'projection': None}
        super().__init__(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        """Validate ``columns`` (``[[field, kind], ...]``, possibly empty when only counts are known) and the
        compression (none for a ``.tar``; ``gz`` for a ``.tar.gz``/``.tgz``, whose raw file is the plain tar)."""
        columns = entry['columns']
        if not isinstance(columns, list) or not all(
                isinstance(c, list) and len(c) == 2 and all(isinstance(v, str) for v in c) for c in columns):
            raise IndexFormatError(f'{where}: "columns" must be a list of [field, kind] pairs, got {columns!r}.')
        if self.compression not in (None, COMPRESSION):
            raise IndexFormatError(f'{where}: webdataset shards are plain .tar files or gzip-compressed .tar.gz/.tgz '
                                   f'files (compression {COMPRESSION!r}); compression {self.compression!r} is not '
                                   f'supported.')
        raw = self.parts[0][0]
        if self.compression is None and is_gzipped(raw.basename):
            raise IndexFormatError(f'{where}: {raw.basename} is listed as a plain tar; this index was derived by an '
                                   f'earlier streaming-webdataset, which read .tar.gz shards outside the cache. Remove '
                                   f'the kept derived index ("streaming cache clear", or derived-index.json in the '
                                   f'stream\'s state directory) or, with a sidecar, run "streaming index DIR" again.')
        self.columns: list[tuple[str, str]] = [(c[0], c[1]) for c in columns]
        projection = entry['projection']
        if projection is not None and (not isinstance(projection, list) or not all(
                isinstance(name, str) and name for name in projection) or len(set(projection)) != len(projection)):
            raise IndexFormatError(f'{where}: "projection" must be null or a list of distinct field names, got '
                                   f'{projection!r}.')
        #: The fields kept, in order (None: every field).
        self.projection: tuple[str, ...] | None = tuple(projection) if projection is not None else None

    def open(self, paths: Sequence[str]) -> WebDatasetView:
        """Open the local tar and find its samples."""
        if len(paths) != 1:
            raise ValueError(f'{self.where}: a webdataset shard is one file, got {len(paths)} paths.')
        return WebDatasetView(self, paths[0])


class WebDatasetView:
    """An opened tar: ``view[i]`` is sample ``i`` as a dict (see the module docstring). The table of its samples
    comes from one walk of its headers, shared with the node's other processes (:mod:`.tablecache`).

    Raises:
        ShardCorruptError: naming the file, when its size or sample count disagrees with the index, or it is damaged.
        TarLayoutError: the tar is not in WebDataset layout (naming the member).
    """

    def __init__(self, reader: WebDatasetReader, path: str) -> None:
        self.path = path
        raw, zipped = reader.parts[0]
        self._url = raw.basename if zipped is None else zipped.basename  # a .tar.gz: the name the user knows
        self._projection = reader.projection
        self._kept = frozenset(reader.projection) if reader.projection is not None else None
        shown = path
        if zipped is not None:
            shown = f'{path} (decompressed from {zipped.basename})'
            remove_stale_copies(path)  # copies of the .tar.gz's earlier versions, no index names them any more
        self._map: Any = map_file(path, raw.bytes)
        size = raw.bytes
        mapping = self._map
        cached = load_table(path, reader.samples, size)
        if cached is not None:
            self._samples: list[Sample] = cached
            return
        try:
            self._samples = group_samples(
                iter_members(lambda start, length: mapping[start:start + length], size, shown), shown)
        except BaseException:
            self.close()
            raise
        if len(self._samples) == reader.samples:
            save_table(path, self._samples)
        else:
            self.close()
            raise ShardCorruptError(f'{shown}: the tar holds {len(self._samples)} samples but the index says '
                                    f'{reader.samples} (the tar was replaced after it was indexed, or a stale '
                                    f'webdataset-index.json: run "streaming index DIR" again).')

    def __len__(self) -> int:
        return len(self._samples)

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self._samples):
            raise IndexError(f'{self.path}: sample {index} is out of range for a tar of {len(self._samples)} '
                             f'samples.')
        sample = self._samples[index]
        out: dict[str, Any] = {'__key__': sample.key, '__url__': self._url}
        mapping = self._map
        kept = self._kept
        if kept is None:
            for field, offset, size in sample.fields:
                out[field] = decode_field(field, mapping[offset:offset + size], f'{self.path}: sample {sample.key!r}')
            return out
        spans = {field: (offset, size) for field, offset, size in sample.fields if field in kept}
        for field in self._projection:  # type: ignore[union-attr]
            span = spans.get(field)
            if span is not None:
                offset, size = span
                out[field] = decode_field(field, mapping[offset:offset + size], f'{self.path}: sample {sample.key!r}')
        return out

    def samples(self, positions: Iterable[int]) -> Iterator[dict[str, Any]]:
        """The samples at ``positions`` in order."""
        for index in positions:
            yield self[index]

    def close(self) -> None:
        """Release the memory map."""
        mapping = getattr(self, '_map', None)
        if mapping is not None and not isinstance(mapping, bytes):
            mapping.close()
        self._map = b''

    def __enter__(self) -> 'WebDatasetView':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WebDatasetFormat:
    """The ``webdataset`` shard format (read-only: write tars with ``webdataset.TarWriter`` or :mod:`tarfile`)."""

    name = 'webdataset'

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False,
               where: str = '') -> WebDatasetReader:
        """Validate one index entry and return its reader."""
        return WebDatasetReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)

    @property
    def writer(self) -> type:
        """No writer: WebDataset tars are written by the tools that make them."""
        raise NotImplementedError('streaming-webdataset reads WebDataset tars; write them with webdataset.TarWriter '
                                  'or tarfile (no index.json is needed), or convert them to MDS with '
                                  '"streaming convert webdataset SRC OUT".')
