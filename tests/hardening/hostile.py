"""Real datasets to mutate, the mutations, and the reading contract for the hostile-input tests.

Every dataset here is written by the project's own writers (MDS, JSON, CSV, TSV, XSV; plain or compressed), so a
mutation starts from a real shard. :func:`read_everything` is what a hostile file is put through: open the dataset
the way a user does (``StreamingDataset(local=...)``) and read every sample by random access. The contract is that
it either succeeds or raises a :class:`~streaming_core.errors.StreamingError` (and only that), within bounded time
and memory; the memory bound is enforced by running it in ``workers/read_server.py`` under ``RLIMIT_AS``.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

#: Column sets per format. The MDS set covers the fixed-size, variable-size and text encodings.
MDS_COLUMNS = {'id': 'int', 'blob': 'bytes', 'arr': 'ndarray:int16', 'f32': 'float32', 'u8': 'uint8'}
MDS_TEXT_COLUMNS = {'id': 'int', 'text': 'str', 'obj': 'json', 'si': 'str_int', 'sf': 'str_float',
                    'sd': 'str_decimal'}
JSON_COLUMNS = {'id': 'int', 'text': 'str', 'score': 'float'}
XSV_COLUMNS = {'id': 'int', 'text': 'str', 'score': 'float'}

#: Format names understood by :func:`write_dataset`.
KINDS = ('mds', 'mds-text', 'json', 'csv', 'tsv', 'xsv')


def mds_sample(i: int) -> dict[str, Any]:
    """The MDS sample ``i`` (binary columns)."""
    return {'id': i, 'blob': bytes([i % 256]) * (i % 7 + 1), 'arr': np.arange(i % 5 + 1, dtype=np.int16) * i,
            'f32': np.float32(i) / 2, 'u8': np.uint8(i % 256)}


def mds_text_sample(i: int) -> dict[str, Any]:
    """The MDS sample ``i`` (text columns)."""
    return {'id': i, 'text': f'sample-{i}-é', 'obj': {'i': i, 'tags': ['a', str(i)]}, 'si': i * 1000,
            'sf': i / 4, 'sd': Decimal(i) / 8}


def text_sample(i: int) -> dict[str, Any]:
    """The JSON/CSV sample ``i``."""
    return {'id': i, 'text': f'row {i} text', 'score': i / 3}


def columns_of(kind: str) -> dict[str, str]:
    """The declared columns of a dataset kind."""
    return {'mds': MDS_COLUMNS, 'mds-text': MDS_TEXT_COLUMNS, 'json': JSON_COLUMNS}.get(kind, XSV_COLUMNS)


def write_dataset(out: str, kind: str, count: int = 24, *, compression: str | None = None,
                  size_limit: int = 1 << 9, hashes: list[str] | None = None, **kwargs: Any) -> str:
    """Write ``count`` samples of ``kind`` into ``out`` with the project's writer; returns ``out``."""
    common = {'out': out, 'compression': compression, 'size_limit': size_limit, 'hashes': hashes, **kwargs}
    if kind in ('mds', 'mds-text'):
        from streaming_mds import MDSWriter
        writer: Any = MDSWriter(columns=columns_of(kind), **common)
        make = mds_sample if kind == 'mds' else mds_text_sample
    elif kind == 'json':
        from streaming_jsonl import JSONWriter
        writer = JSONWriter(columns=JSON_COLUMNS, **common)
        make = text_sample
    else:
        from streaming_csv import CSVWriter, TSVWriter, XSVWriter
        if kind == 'xsv':
            writer = XSVWriter(columns=XSV_COLUMNS, separator='|', **common)
        else:
            writer = {'csv': CSVWriter, 'tsv': TSVWriter}[kind](columns=XSV_COLUMNS, **common)
        make = text_sample
    with writer:
        for i in range(count):
            writer.write(make(i))
    return out


def load_index(directory: str) -> dict[str, Any]:
    """The parsed ``index.json`` of a dataset directory."""
    with open(os.path.join(directory, 'index.json')) as handle:
        return json.load(handle)


def save_index(directory: str, index: Any) -> None:
    """Overwrite ``index.json`` with ``index`` (any JSON value)."""
    with open(os.path.join(directory, 'index.json'), 'w') as handle:
        json.dump(index, handle)


def shard_files(directory: str) -> list[str]:
    """The shard files of a dataset directory (everything but the index and hidden files), sorted."""
    return sorted(name for name in os.listdir(directory) if name != 'index.json' and not name.startswith('.'))


def copy_dataset(source: str, target: str) -> str:
    """A fresh copy of a dataset directory (each mutation works on its own copy)."""
    shutil.copytree(source, target)
    return target


# ----------------------------------------------------------------------------------------------------------------
# Mutations of file bytes.
@dataclass(frozen=True)
class Mutation:
    """One edit of one file's bytes: ``kind`` in flip / truncate / extend / put_u32 / overwrite."""

    kind: str
    position: int = 0        # a byte offset (modulo the file size where that makes sense)
    value: int = 0           # the bit to flip (0-7), the u32 to put, the byte count to append or keep
    data: bytes = b''        # bytes to append or overwrite with

    def apply(self, data: bytes) -> bytes:
        """The mutated bytes."""
        size = len(data)
        if self.kind == 'flip':
            if not size:
                return b'\x01'
            at = self.position % size
            return data[:at] + bytes([data[at] ^ (1 << (self.value % 8))]) + data[at + 1:]
        if self.kind == 'truncate':
            return data[:self.position % (size + 1)] if size else data
        if self.kind == 'extend':
            return data + (self.data or b'\0' * max(self.value, 1))
        if self.kind == 'put_u32':  # rewrite one little-endian u32 (MDS header/offset table, JSON/XSV meta files)
            at = (self.position % max(size // 4, 1)) * 4
            patched = struct.pack('<I', self.value & 0xFFFFFFFF)
            return (data[:at] + patched + data[at + 4:])[:max(size, at + 4)]
        if self.kind == 'overwrite':
            at = self.position % (size + 1)
            return data[:at] + self.data + data[at + len(self.data):]
        raise ValueError(f'unknown mutation {self.kind!r}')


def mutate_file(path: str, mutation: Mutation) -> None:
    """Apply ``mutation`` to the file at ``path`` in place."""
    with open(path, 'rb') as handle:
        data = handle.read()
    with open(path, 'wb') as handle:
        handle.write(mutation.apply(data))


# ----------------------------------------------------------------------------------------------------------------
# Mutations of index.json fields.
def index_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (tuple of keys and list indices) to a value inside a JSON document, containers included."""
    out = [prefix]
    if isinstance(obj, dict):
        for key in sorted(obj):
            out.extend(index_paths(obj[key], (*prefix, key)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out.extend(index_paths(value, (*prefix, i)))
    return out


def set_path(obj: Any, path: tuple[Any, ...], value: Any, delete: bool = False) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced (or removed with ``delete``)."""
    if not path:
        return value
    clone = json.loads(json.dumps(obj))
    node = clone
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return clone


# ----------------------------------------------------------------------------------------------------------------
# The reading contract.
def read_everything(directory: str, *, allow_unsafe_types: bool = False, iterate: bool = True) -> dict[str, Any]:
    """Open the dataset in ``directory`` as a user would, iterate one epoch (``iterate``), then read every sample
    by random access.

    Returns ``{'ok': True, 'samples': n}`` when every sample was read (and each is a dict with the declared
    columns), else ``{'ok': False, 'type': ..., 'mro': [...], 'causes': [...], 'message': ..., 'streaming': bool}``
    for the first exception (``causes``: the type names of its cause chain). Never raises (interpreter-level
    failures are detected by the caller).
    """
    from streaming_core import StreamingDataset
    from streaming_core.errors import StreamingError
    try:
        dataset = StreamingDataset(local=directory, batch_size=1, allow_unsafe_types=allow_unsafe_types)
        expected = _declared_columns(dataset)
        if iterate:
            iterated = sum(1 for _ in dataset)  # plans the epoch (sized by the index) and reads in order
            if iterated != dataset.num_samples:
                return {'ok': False, 'type': 'ShortEpoch', 'mro': [], 'causes': [], 'streaming': False,
                        'message': f'an epoch yielded {iterated} of {dataset.num_samples} samples'}
        count = 0
        for i in range(dataset.num_samples):
            item = dataset[i]
            if not isinstance(item, dict) or (expected is not None and set(item) != expected):
                return {'ok': False, 'type': 'WrongSample', 'mro': [], 'causes': [], 'streaming': False,
                        'message': f'sample {i} came back as {type(item).__name__} '
                                   f'{sorted(item) if isinstance(item, dict) else repr(item)[:80]}, '
                                   f'declared columns {sorted(expected or [])}'}
            count += 1
        return {'ok': True, 'samples': count}
    except Exception as err:  # the contract is checked by the caller from the description
        causes = []
        cause = err.__cause__ or err.__context__
        while cause is not None and len(causes) < 8:
            causes.append(type(cause).__name__)
            cause = cause.__cause__ or cause.__context__
        return {'ok': False, 'type': type(err).__name__, 'mro': [c.__name__ for c in type(err).__mro__],
                'causes': causes, 'message': str(err)[:500], 'streaming': isinstance(err, StreamingError)}


def _declared_columns(dataset: Any) -> set[str] | None:
    names: set[str] | None = None
    for reader in dataset.shards:
        cols = getattr(reader, 'column_names', None)
        if cols is None:
            cols = list(getattr(reader, 'columns', {}) or {})
        if names is None:
            names = set(cols)
        elif names != set(cols):
            return None  # shards disagree: nothing to compare against
    return names
