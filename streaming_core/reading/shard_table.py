"""One stream's shards as a read-only table over its mapped binary index: per-shard arrays, readers on first touch.

:mod:`streaming_core.reading.binary_index` builds, writes and maps the file; a :class:`ShardTable` is the view the
rest of the core reads through: sample counts and byte totals per shard as arrays of the mapping (no Python object per
shard), each shard's entry rebuilt exactly as ``index.json`` holds it from its template and its per-shard fields, and
the shard's reader created by its format plugin only when the shard is first indexed. The format plugin of every
template checks one reader when the table is opened, and the format's per-shard limits are checked from the
template's build-time statistics.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import IndexFormatError, UnknownNameError

__all__ = ['ShardTable']


class ShardTable(Sequence[Any]):
    """One stream's shards, from its mapped binary index: per-shard arrays, and readers created on first touch.

    Indexing returns the shard's reader (built by its format plugin from exactly the entry ``index.json`` holds,
    then kept); the arrays (:attr:`samples_per_shard`, :attr:`max_size_per_shard`...) never create readers.
    Pickles as the stream, the index identity and the layout digest: the unpickled table maps the node's file,
    rebuilding it where it is absent (see :meth:`streaming_core.reading.stream.Stream.shard_table`).

    Args:
        stream: The stream.
        path: The binary index file.
        header: Its header.
        arrays: Its arrays.
        mapping: The mapping the arrays view (kept open).
        allow_unsafe_types: Passed to every reader.
        built_here: Whether this process built the file.
    """

    def __init__(self, stream: Any, path: str, header: dict[str, Any], arrays: dict[str, NDArray[Any]],
                 mapping: Any, allow_unsafe_types: bool, built_here: bool = False) -> None:
        self.stream = stream
        self.path = path
        self.header = header
        self.arrays = arrays
        self._mapping = mapping
        self.allow_unsafe_types = allow_unsafe_types
        self.built_here = built_here
        self._readers: dict[int, Any] = {}
        self._template_text = [json.dumps(t['entry']) for t in header['templates']]
        self._formats: list[Any] = []
        self._check_templates()

    # ----------------------------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        """The index source identity this table was built from."""
        return self.header['identity']

    @property
    def layout(self) -> str:
        """A digest of the shards' sample counts and file names and hashes (machine-independent)."""
        return self.header['layout']

    @property
    def source(self) -> str:
        """The ``index.json`` the table was built from."""
        return self.header['source']

    @property
    def samples_per_shard(self) -> NDArray[np.int64]:
        """Samples per shard (a view of the mapping)."""
        return self.arrays['samples']

    @property
    def max_size_per_shard(self) -> NDArray[np.int64]:
        """The most disk each shard occupies at once (raw plus compressed bytes)."""
        return self.arrays['raw_bytes'] + self.arrays['zip_bytes']

    def basename(self, shard: int) -> str:
        """The name of the shard's first file (its raw data file, as ``reader.parts[0][0].basename``)."""
        return self.entry(shard)[self._first_raw_key(int(self.arrays['template'][shard]))]['basename']

    def _first_raw_key(self, tid: int) -> str:
        slots = self.header['templates'][tid]['slots']
        raws = [key for key, _ in slots if key.startswith('raw_')]
        return 'raw_data' if 'raw_data' in raws else raws[0]

    def __len__(self) -> int:
        return int(self.header['num_shards'])

    def _string(self, index: int) -> str:
        off = self.arrays['str_off']
        return bytes(self.arrays['str_blob'][int(off[index]):int(off[index + 1])]).decode('utf-8')

    def entry(self, shard: int) -> dict[str, Any]:
        """The shard's entry exactly as ``index.json`` holds it."""
        if not 0 <= shard < len(self):
            raise IndexError(f'shard {shard} out of range for {len(self)} shards of {self.source}.')
        arrays = self.arrays
        tid = int(arrays['template'][shard])
        entry: dict[str, Any] = json.loads(self._template_text[tid])
        entry['samples'] = int(arrays['samples'][shard])
        row = int(arrays['file_start'][shard])
        for key, algos in self.header['templates'][tid]['slots']:
            if algos is None:
                entry[key] = None
                continue
            first = int(arrays['hash_start'][row])
            hashes = {algo: self._string(int(arrays['hash_str'][first + k])) for k, algo in enumerate(algos)}
            entry[key] = {'basename': self._string(int(arrays['file_name'][row])),
                          'bytes': int(arrays['file_bytes'][row]), 'hashes': hashes}
            row += 1
        return entry

    def file_names(self, shard: int) -> list[str]:
        """The names of the shard's files (raw and compressed, as the index lists them), without creating its
        reader."""
        arrays = self.arrays
        first, end = int(arrays['file_start'][shard]), int(arrays['file_start'][shard + 1])
        return [self._string(int(arrays['file_name'][row])) for row in range(first, end)]

    def _make_reader(self, shard: int) -> Any:
        where = f'{self.source} shard {shard}'
        reader = self._formats[int(self.arrays['template'][shard])].reader(
            self.entry(shard), allow_unsafe_types=self.allow_unsafe_types, where=where)
        return reader

    def __getitem__(self, shard: Any) -> Any:  # type: ignore[override]
        if isinstance(shard, slice):
            return [self[i] for i in range(*shard.indices(len(self)))]
        shard = int(shard)
        if shard < 0:
            shard += len(self)
        reader = self._readers.get(shard)
        if reader is None:
            reader = self._readers[shard] = self._make_reader(shard)
        return reader

    def __iter__(self) -> Iterator[Any]:
        for shard in range(len(self)):
            yield self[shard]

    @property
    def has_compressed_files(self) -> bool:
        """Whether any shard has a compressed file (readers decompress it beside itself, in the local directory)."""
        return any(key.startswith('zip_') and algos is not None
                   for template in self.header['templates'] for key, algos in template['slots'])

    @property
    def created(self) -> int:
        """How many readers this process has created (the shards it touched)."""
        return len(self._readers)

    def hash_algorithms(self) -> list[tuple[str, list[str]]]:
        """Per file slot of every template in use: ``(file name of its first shard, hash names recorded)`` for
        the files a download would fetch (the compressed file of a part when there is one, else the raw one)."""
        out = []
        for template in self.header['templates']:
            slots = dict((key, algos) for key, algos in template['slots'])
            first = self.entry(int(template['first']))
            for key in slots:
                if not key.startswith('raw_'):
                    continue
                zipped = 'zip_' + key[4:]
                use = zipped if slots.get(zipped) is not None else key
                out.append((first[use]['basename'], list(slots[use] or [])))
        return out

    # ----------------------------------------------------------------------------------------------------------
    def _check_templates(self) -> None:
        """Validate every template through its format plugin (one reader per template, with this dataset's
        ``allow_unsafe_types``), then the per-shard limits the format states, vectorised."""
        from streaming_core.machinery.lookup import get_registry
        formats = get_registry('format')
        self._formats = []
        for template in self.header['templates']:
            first = int(template['first'])
            where = f'{self.source} shard {first}'
            name = template['entry'].get('format')
            if not isinstance(name, str):
                raise IndexFormatError(f'{where}: missing or invalid "format" field: {name!r}.')
            if template['entry'].get('version') != 2:
                raise IndexFormatError(f'{where}: unsupported shard version {template["entry"].get("version")!r}; '
                                       f'expected 2.')
            try:
                shard_format = formats.get(name)
            except UnknownNameError as err:
                raise UnknownNameError(f'{where}: {err}') from None
            self._formats.append(shard_format)
            reader = shard_format.reader(self.entry(first), allow_unsafe_types=self.allow_unsafe_types, where=where)
            self._readers[first] = reader
            self._check_limits(type(reader), len(self._formats) - 1)

    def _check_limits(self, cls: type, tid: int) -> None:
        """The format's per-shard limits, from the template's build-time statistics (its shard of least raw bytes
        per sample, its largest file): no pass over the per-shard arrays, whose pages would count in every
        process's resident memory, unless a limit is broken (then the offending shard is found and named)."""
        template = self.header['templates'][tid]
        arrays = self.arrays
        per_sample = getattr(cls, 'min_bytes_per_sample', 0)
        densest = template.get('densest')
        if per_sample and densest is not None and \
                int(arrays['samples'][densest]) * per_sample > int(arrays['raw_bytes'][densest]):
            self._scan_limits(cls, tid)
        limit = getattr(cls, 'max_file_bytes', None)
        if limit is not None and int(template.get('max_file_bytes', 0)) > limit:
            self._scan_limits(cls, tid)

    def _scan_limits(self, cls: type, tid: int) -> None:
        """Find and name the first shard of template ``tid`` that breaks a limit of its format (vectorised)."""
        arrays = self.arrays
        mine = np.flatnonzero(arrays['template'] == tid) if len(self.header['templates']) > 1 else None
        raw = arrays['raw_bytes'] if mine is None else arrays['raw_bytes'][mine]
        counts = arrays['samples'] if mine is None else arrays['samples'][mine]
        per_sample = getattr(cls, 'min_bytes_per_sample', 0)
        if per_sample:
            bad = np.flatnonzero(counts > raw // per_sample)  # counts * per_sample > raw, without overflow
            if bad.size:
                shard = int(bad[0]) if mine is None else int(mine[bad[0]])
                self[shard]  # the format's own check names the shard and the sizes
                raise IndexFormatError(f'{self.source} shard {shard}: {int(counts[bad[0]])} samples cannot fit in '
                                       f'{int(raw[bad[0]])} bytes of shard files.')
        limit = getattr(cls, 'max_file_bytes', None)
        if limit is not None and int(arrays['file_bytes'].max(initial=0)) > limit:
            rows = np.flatnonzero(arrays['file_bytes'] > limit)
            shards = np.searchsorted(arrays['file_start'], rows, side='right') - 1
            for shard in shards.tolist():
                if mine is None or shard in set(mine.tolist()):
                    self[shard]  # raises, naming the file

    # ----------------------------------------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {'stream': self.stream, 'identity': self.identity, 'layout': self.layout,
                'allow_unsafe_types': self.allow_unsafe_types}

    def __setstate__(self, state: dict[str, Any]) -> None:
        table = state['stream'].shard_table(state['allow_unsafe_types'], expect=(state['identity'], state['layout']))
        self.__dict__.update(table.__dict__)
