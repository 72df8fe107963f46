"""``MDSWriter``: writes samples into MDS shards, byte-identical to the reference's for the same input.

Each shard is ``u32 N``, ``u32 offsets[N+1]``, the pyjson-sorted writer config, then the samples. Size accounting
follows the reference exactly (spec 2.4): a new shard counts ``4 + 4 + len(config)`` bytes and each sample its
length plus 4 (its offset), so shards split at the same samples.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streaming_core.plugin_api import (
    CodecError,
    MissingColumnError,
    SampleSizeError,
    ShardWriter,
    UnknownNameError,
    pyjson_sorted,
)
from streaming_mds.encodings import Bytes, Int, Str, UnknownEncodingError, short_repr
from streaming_mds.resolve import get_codec

__all__ = ['MDSWriter', 'compile_encoder']

_U32 = struct.Struct('<I')


class MDSWriter(ShardWriter):
    """Write samples (dicts) to MDS shards.

    Args:
        columns: Column name to encoding string (``{'image': 'jpeg', 'label': 'int'}``); any registered
            encoding, including ``ndarray:<dtype>:<shape>`` forms and third-party codecs.
        out: A local directory, a remote URL, or a ``(local, remote)`` tuple.
        keep_local: With a remote, keep the local files after upload.
        compression: ``None`` or a compression string (``'zstd'``, ``'zstd:7'``, ``'br:11'``, ...).
        hashes: Sorted hash names recorded per file (``['sha1', 'xxh3_64']``).
        size_limit: Shard size limit (bytes or ``'64mb'``); ``None`` for no limit. Default ``1 << 26``.
        **kwargs: ``progress_bar``, ``max_workers``, ``retry``, ``exist_ok``, ``storage_options``,
            ``upload_timeout`` (see :class:`~streaming_core.writing.writer.ShardWriter`).

    Raises:
        UnknownEncodingError: a column names an encoding no installed plugin provides (a ``TypeError``).
        CodecError: a malformed encoding string (``'str:x'``, ``'ndarray:bool'``).
    """

    format = 'mds'
    extra_bytes_per_sample = 4

    def __init__(self, *, columns: Mapping[str, str], out: str | Sequence[str], keep_local: bool = False,
                 compression: str | None = None, hashes: list[str] | None = None,
                 size_limit: int | str | None = 1 << 26, **kwargs: Any) -> None:
        if not isinstance(columns, Mapping):
            raise TypeError(f'MDSWriter `columns` must map column names to encodings, got {type(columns).__name__}.')
        for name, encoding in columns.items():
            if not isinstance(name, str):
                raise TypeError(f'MDSWriter column names must be strings, got {name!r}.')
            if not isinstance(encoding, str):
                raise TypeError(f'MDSWriter passed column {name!r} with encoding {encoding!r}, which is not an '
                                f'encoding string.')
        self.column_names = sorted(columns)
        self.column_encodings = [columns[name] for name in self.column_names]
        codecs = []
        for name, encoding in zip(self.column_names, self.column_encodings, strict=True):
            try:
                codecs.append(get_codec(encoding))
            except UnknownNameError as err:
                hint = getattr(err, 'hint', '') or str(err).partition('\n')[2]
                error = UnknownEncodingError('\n'.join(filter(None, [
                    f'MDSWriter passed column {name!r} with encoding {encoding!r} is unsupported.', hint])))
                error.hint = hint
                raise error from None
            except CodecError as err:
                raise CodecError(f'MDSWriter column {name!r}: {err}') from None
        self.columns = dict(zip(self.column_names, self.column_encodings, strict=True))
        self.column_sizes = [codec.size for codec in codecs]
        self._plan = [(name, codec.encode, codec.size, encoding)
                      for name, encoding, codec in zip(self.column_names, self.column_encodings, codecs, strict=True)]
        self._head = struct.Struct(f'<{sum(size is None for size in self.column_sizes)}I')
        self._compiled = compile_encoder(self._plan, [type(codec) for codec in codecs], self._head.pack)
        if type(self).encode_sample is MDSWriter.encode_sample:  # a subclass's own encode_sample must run
            self._encode_fast = self._compiled
        self._config_data = b''
        super().__init__(out=out, keep_local=keep_local, compression=compression, hashes=hashes,
                         size_limit=size_limit, **kwargs)

    def get_config(self) -> dict[str, Any]:
        """The shard entry fields of this writer, also embedded in every shard."""
        config = super().get_config()
        config.update({'column_encodings': self.column_encodings, 'column_names': self.column_names,
                       'column_sizes': self.column_sizes})
        return config

    def encode_config(self) -> bytes:
        """The config text embedded in each shard (pyjson-sorted, UTF-8)."""
        return pyjson_sorted(self.get_config()).encode('utf-8')

    def shard_overhead(self) -> int:
        """``4 + 4 + len(config)``: the sample count, the first offset and the config text."""
        self._config_data = self.encode_config()
        return 8 + len(self._config_data)

    def encode_sample(self, sample: Mapping[str, Any]) -> bytes:
        """The sample's bytes: the ``u32`` lengths of the variable-size columns, then every column's bytes.

        A value that is already ``bytes`` is stored as it is, whatever the column's encoding; a fixed-size column
        then still has to have exactly its size. The encoder compiled for this writer's columns runs first; when it
        cannot encode the sample, :meth:`_encode_sample_checked` raises the precise error, naming the column.
        """
        data = self._compiled(sample)
        return data if data is not None else self._encode_sample_checked(sample)

    def _encode_sample_checked(self, sample: Mapping[str, Any]) -> bytes:
        """The generic encoder: one column at a time, with a specific error for every kind of bad input."""
        sizes = []
        parts = []
        for name, encode, size, encoding in self._plan:
            try:
                value = sample[name]
            except KeyError:
                raise MissingColumnError(f'The sample has no column {name!r} (declared columns: '
                                         f'{self.column_names}).') from None
            except TypeError:
                raise TypeError(f'MDSWriter.write takes a dict of column values, got {type(sample).__name__}.') \
                    from None
            try:
                data = value if isinstance(value, bytes) else encode(value)
            except CodecError as err:
                raise _column_error(err, name, encoding, value) from None
            except Exception as err:  # a third-party codec's own failure: keep its traceback
                raise CodecError(f'Column {name!r} (declared {encoding!r}): its codec failed on '
                                 f'{type(value).__name__} {short_repr(value)}: {type(err).__name__}: {err}') from err
            if size is None:
                sizes.append(len(data))
            elif len(data) != size:
                raise SampleSizeError(f'Unexpected data size; was this data typed with the correct encoding '
                                 f'({encoding})? Column {name!r} takes exactly {size} bytes, got {len(data)}.')
            parts.append(data)
        if sizes:
            parts.insert(0, self._head.pack(*sizes))
        return b''.join(parts)

    def encode_shard(self, samples: Sequence[bytes]) -> dict[str, bytes]:
        """The shard file: count, absolute offsets, config, samples."""
        count = len(samples)
        offsets = np.empty(count + 1, np.int64)
        offsets[0] = 4 + 4 * (count + 1) + len(self._config_data)
        if count:
            np.cumsum(np.fromiter(map(len, samples), np.int64, count), out=offsets[1:])
            offsets[1:] += offsets[0]
        return {'data': b''.join([_U32.pack(count), offsets.astype('<u4').tobytes(), self._config_data, *samples])}


_INLINE = {Bytes: 'v{i} if _isinstance(v{i}, _bytes) else e{i}(v{i})',
           Int: 'v{i}.to_bytes(8, "little", signed=True) if v{i}.__class__ is _int else '
                '(v{i} if _isinstance(v{i}, _bytes) else e{i}(v{i}))',
           Str: 'v{i}.encode("utf-8") if v{i}.__class__ is _str else '
                '(v{i} if _isinstance(v{i}, _bytes) else e{i}(v{i}))'}


def _column_error(err: CodecError, name: str, encoding: str, value: Any) -> CodecError:
    """One message naming the column, its encoding, the value's type and a short repr (of the codec's class)."""
    takes = getattr(err, 'takes', None)
    if takes:
        message = (f'Column {name!r} is declared {encoding!r} (which takes {takes}), but the value is '
                   f'{type(value).__name__}: {short_repr(value)}.')
    else:
        message = f'Column {name!r} (declared {encoding!r}, value {type(value).__name__}): {err}'
    try:
        error = type(err)(message)
    except Exception:  # a third-party subclass with another constructor
        error = CodecError(message)
    if takes:
        error.takes = takes  # type: ignore[attr-defined]
    return error


def compile_encoder(plan: Sequence[tuple[str, Any, int | None, str]], kinds: Sequence[type],
                    pack_head: Any) -> Any:
    """Build ``encode(sample) -> bytes | None`` for one column layout, with the column order, the fixed sizes and
    the builtin ``bytes``/``int``/``str`` encodings inlined. It returns ``None`` (never raises) on any exception
    or size mismatch: the caller then runs the generic encoder, which raises the precise error from a normal frame
    (so no traceback shows generated code, and no error is chained to another).
    """
    env: dict[str, Any] = {'_pack': pack_head, '_bytes': bytes, '_int': int, '_str': str,
                           '_isinstance': isinstance, '_len': len}
    lines = ['def encode(sample):', '    try:']
    lengths, pieces = [], []
    for i, ((name, encode, size, _), kind) in enumerate(zip(plan, kinds, strict=True)):
        env[f'k{i}'] = name
        env[f'e{i}'] = encode
        lines.append(f'        v{i} = sample[k{i}]')
        template = _INLINE.get(kind, 'v{i} if _isinstance(v{i}, _bytes) else e{i}(v{i})')
        lines.append(f'        d{i} = ' + template.format(i=i))
        if size is None:
            lengths.append(f'_len(d{i})')
        else:
            lines.append(f'        if _len(d{i}) != {int(size)}:')
            lines.append('            return None')
        pieces.append(f'd{i}')
    if lengths:
        pieces.insert(0, f'_pack({", ".join(lengths)})')
    lines.append(f'        return b"".join(({", ".join(pieces)}{"," if pieces else ""}))')
    lines.append('    except Exception:')
    lines.append('        return None')
    exec('\n'.join(lines), env)  # noqa: S102 - source built from integers and fixed identifiers only
    return env['encode']
