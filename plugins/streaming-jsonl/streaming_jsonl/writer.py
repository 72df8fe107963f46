"""``JSONWriter``: JSON-lines shards with a binary ``.meta`` offset index (spec 3.1).

Data file: one ``pyjson-sorted(sample) + newline`` per sample (only the declared columns). Meta file: ``u32 N``,
``u32 offsets[N+1]`` relative to the data file (``0`` .. data size), then the pyjson-sorted writer config.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import CodecError, ColumnTypeError, MissingColumnError, ShardWriter, pyjson_sorted

__all__ = ['JSONWriter', 'JSON_ENCODINGS', 'check_json_value']

_U32 = struct.Struct('<I')

#: The JSON-format column encodings and the Python types each accepts (``bool`` counts as ``int``).
JSON_ENCODINGS: dict[str, type] = {'str': str, 'int': int, 'float': float}


def check_json_value(name: str, encoding: str, value: Any) -> None:
    """Raise :class:`~streaming_core.errors.ColumnTypeError` (an ``AttributeError`` too, as the reference) unless
    ``value`` has the type ``encoding`` takes."""
    if not isinstance(value, JSON_ENCODINGS[encoding]):
        raise ColumnTypeError(f'Column {name!r} is declared {encoding!r}, but the value is {type(value).__name__}: '
                         f'{value!r:.60}.' + (' (an int is not a float; convert it with float())'
                                              if encoding == 'float' and isinstance(value, int) else ''))


def _json_error(obj: Mapping[str, Any], err: BaseException) -> CodecError:
    """One message naming the first column whose value JSON cannot store (a ``str`` subclass or a ``float`` is
    accepted by the type check, but may hold something JSON refuses inside a container)."""
    for name, value in obj.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError, RecursionError) as inner:
            return CodecError(f'Column {name!r} cannot be written as JSON: the value is {type(value).__name__}: '
                              f'{value!r:.60}: {inner}')
    return CodecError(f'The sample cannot be written as JSON: {err}')


class JSONWriter(ShardWriter):
    """Write samples to JSON-lines shards.

    Args:
        columns: Column name to ``'str'``, ``'int'`` or ``'float'`` (type checks only; JSON stores the value).
        newline: The line terminator (default a line feed), stored in the index.
        out, keep_local, compression, hashes, size_limit, **kwargs: As for every writer
            (:class:`~streaming_core.writing.writer.ShardWriter`).
    """

    format = 'json'
    part_names = ('data', 'meta')

    def __init__(self, *, columns: Mapping[str, str], newline: str = '\n', out: str | Sequence[str],
                 keep_local: bool = False, compression: str | None = None, hashes: list[str] | None = None,
                 size_limit: int | str | None = 1 << 26, **kwargs: Any) -> None:
        if not isinstance(columns, Mapping):
            raise TypeError(f'JSONWriter `columns` must map column names to encodings, got {type(columns).__name__}.')
        for name, encoding in columns.items():
            if not isinstance(name, str):
                raise TypeError(f'JSONWriter column names must be strings, got {name!r}.')
            if encoding not in JSON_ENCODINGS:
                raise CodecError(f'JSONWriter column {name!r} has encoding {encoding!r}; the JSON format takes '
                                 f'{", ".join(JSON_ENCODINGS)}.')
        if not isinstance(newline, str) or not newline:
            raise ValueError(f'JSONWriter `newline` must be a non-empty string, got {newline!r}.')
        self.columns = dict(columns)
        self.newline = newline
        self._newline_bytes = newline.encode('utf-8')
        self._plan = [(name, JSON_ENCODINGS[encoding], encoding) for name, encoding in self.columns.items()]
        super().__init__(out=out, keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)
        self._config_data = pyjson_sorted(self.config).encode('utf-8')

    def get_config(self) -> dict[str, Any]:
        """The shard entry fields of this writer (also appended to each meta file)."""
        config = super().get_config()
        config.update({'columns': self.columns, 'newline': self.newline})
        return config

    def encode_sample(self, sample: Mapping[str, Any]) -> bytes:
        """``pyjson-sorted({column: value}) + newline`` in UTF-8."""
        obj = {}
        for name, type_, encoding in self._plan:
            try:
                value = sample[name]
            except KeyError:
                raise MissingColumnError(f'The sample has no column {name!r} (declared columns: '
                                         f'{list(self.columns)}).') from None
            if not isinstance(value, type_):
                check_json_value(name, encoding, value)
            obj[name] = value
        try:
            text = json.dumps(obj, sort_keys=True)
        except (TypeError, ValueError, RecursionError) as err:
            raise _json_error(obj, err) from None
        return text.encode('utf-8') + self._newline_bytes

    def encode_shard(self, samples: Sequence[bytes]) -> dict[str, bytes]:
        """The data (concatenated lines) and meta (count, relative offsets, config) files."""
        count = len(samples)
        offsets = np.zeros(count + 1, np.int64)
        if count:
            np.cumsum(np.fromiter(map(len, samples), np.int64, count), out=offsets[1:])
        meta = b''.join([_U32.pack(count), offsets.astype('<u4').tobytes(), self._config_data])
        return {'data': b''.join(samples), 'meta': meta}
