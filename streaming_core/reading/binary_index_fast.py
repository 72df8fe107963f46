"""The binary index of a small ``index.json``, parsed at once and checked column by column.

:func:`~streaming_core.reading.binary_index.build_binary` decodes one shard entry at a time and checks it in Python:
bounded memory at any size, but about 20 us per shard. An index small enough to parse whole
(:data:`FAST_PARSE_BYTES`) whose shards all share one template (the usual case: one writer, one column layout, one
compression, the same hash algorithms) is converted here instead: parsed whole (:func:`json.loads`; from
:data:`MSGSPEC_BYTES`, ``msgspec``'s decoder, which gives the same objects in about 60% of the time, and the
shard entries as records of the first entry's keys, in about 70% of that again), then
each field checked over all shards at once (types through ``map``, names through one regular expression, integers
through NumPy) and the columns assembled with NumPy. The result is byte for byte what ``build_binary`` gives (a test
compares them); on any doubt (another template, a malformed entry, a file name to refuse) :func:`build_parsed`
returns None and the caller takes the general path, which reports the problem with its usual message.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import keyword
import re
from operator import attrgetter, itemgetter
from typing import Any, Callable, Iterator, Optional

import numpy as np

from streaming_core.reading.index_file import may_have_two_shards_keys

__all__ = ['FAST_PARSE_BYTES', 'build_parsed', 'ArrayColumn']

#: Indexes up to this size are parsed whole (a parsed index takes several times its size in Python objects).
FAST_PARSE_BYTES = 64 << 20
#: From this size an index is parsed by ``msgspec``, in about 60% of :func:`json.loads`'s time (2.8 MB, 10,000 shards:
#: 22-24 ms against 37-44); below it, importing ``msgspec`` (about 4.5 ms beside torch) would cost more than it saves.
MSGSPEC_BYTES = 1 << 20
_MAX_INT64 = (1 << 63) - 1
_HEX = re.compile(r'[0-9a-f]*')
_DRIVE = re.compile(r'(?:\A|\0)[A-Za-z]:')


class ArrayColumn:
    """A finished column (what :func:`~streaming_core.reading.binary_index.write_binary` reads) over a NumPy array."""

    def __init__(self, values: Any, dtype: str) -> None:
        self.dtype = dtype
        self._array = np.ascontiguousarray(values, dtype=np.dtype(dtype))

    def __len__(self) -> int:
        return len(self._array)

    @property
    def nbytes(self) -> int:
        """The column's size in bytes."""
        return self._array.nbytes

    def chunks(self) -> Iterator[bytes]:
        """The column's bytes (one piece)."""
        if len(self._array):
            yield self._array.tobytes()

    def close(self) -> None:
        """Nothing to release."""


def _ints(values: list[Any], low: int = 0) -> np.ndarray | None:
    """``values`` as int64 when every one is an ``int`` (not a bool) within ``[low, 2**63)``, else None."""
    if values and set(map(type, values)) != {int}:
        return None
    try:
        array = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    return array if not len(array) or int(array.min()) >= low else None


def _names_ok(names: list[str]) -> bool:
    """Whether every name passes :func:`~streaming_core.reading.index_file.check_basename` (checked on all names at
    once: no NUL or backslash, no empty, ``.`` or ``..`` component, hence no leading or trailing ``/``, no drive)."""
    joined = '\0'.join(names)
    if joined.count('\0') != len(names) - 1 or '\\' in joined:
        return False
    flat = '\0' + joined.replace('/', '\0') + '\0'
    if '\0\0' in flat or '\0.\0' in flat or '\0..\0' in flat:
        return False
    if not joined.isascii():
        try:
            joined.encode('utf-8')
        except UnicodeEncodeError:  # an unpaired surrogate: the general path names it
            return False
    return not (':' in joined and _DRIVE.search(joined))


def build_parsed(data: bytes, path: str, identity: str, *, version: int,
                 add_template: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(header, columns)`` of the binary form of the index text ``data`` (see the module doc), or None when the
    general path must build it.

    ``version`` (the file format version) and ``add_template`` (how the general build records a template) come
    from :mod:`~streaming_core.reading.binary_index`, which calls this module (never the other way round).

    The garbage collector is paused meanwhile: parsing creates a few objects per shard, none in a cycle, and each
    collection they would trigger walks every object of the process (torch's included) for nothing."""
    if len(data) > FAST_PARSE_BYTES or b'"shards"' not in data or may_have_two_shards_keys(data):
        return None
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _build_parsed(data, path, identity, version, add_template)
    finally:
        if enabled:
            gc.enable()


def _msgspec_for(data: bytes) -> Any:
    """The ``msgspec`` module when ``data`` is large enough for it to pay (:data:`MSGSPEC_BYTES`) and it is
    installed (it may be missing where the package was installed without its dependencies: ``json`` gives the
    same, slower), else None."""
    if len(data) < MSGSPEC_BYTES:
        return None
    try:
        import msgspec
    except ImportError:
        return None
    return msgspec


def _parse(data: bytes) -> Any:
    """The JSON value of ``data``, as :func:`json.loads` gives it, except that from :data:`MSGSPEC_BYTES` the shard
    entries may come as records (see :func:`_decode_records`) instead of dicts.

    Raises:
        ValueError: ``data`` is not JSON, or is a text only ``json`` takes (``NaN``, a lone surrogate escape), which
            ``msgspec`` refuses: the caller then takes the general path, which decodes with ``json``.
    """
    msgspec = _msgspec_for(data)
    if msgspec is not None:
        records = _decode_records(msgspec, data)
        if records is not None:
            return records
    return _decode_dicts(data)


def _decode_dicts(data: bytes) -> Any:
    """The JSON value of ``data`` exactly as :func:`json.loads` gives it (with ``msgspec`` from
    :data:`MSGSPEC_BYTES`; see :func:`_parse` for the errors)."""
    msgspec = _msgspec_for(data)
    if msgspec is not None:
        try:
            return msgspec.json.decode(data)
        except msgspec.MsgspecError as err:  # a ValueError only from msgspec 0.21
            raise ValueError(str(err)) from None
    return json.loads(data.decode('utf-8'))


def _decode_records(msgspec: Any, data: bytes) -> dict[str, Any] | None:
    """``{'version': ..., 'shards': [record, ...]}`` with each shard entry decoded as a ``msgspec`` record of the
    first entry's keys (its ``raw_*`` / ``zip_*`` files as records of ``basename``, ``bytes``, ``hashes``, or None),
    every other value as ``json`` gives it; None when that shape does not hold for every entry (a key missing or
    added, another file shape), and the caller decodes dicts. Records take about 60% of the time of dicts to decode
    and to free (10,000 shards: 10 and 5 ms, against 15 and 8)."""
    start = data.find(b'{', data.find(b'"shards"') + 8)
    try:  # the first entry's keys; a wrong guess only means the records do not fit
        first, _ = json.JSONDecoder().raw_decode(data.decode('utf-8', 'replace'), start)
    except (ValueError, RecursionError):
        return None
    if type(first) is not dict or not first or not all(
            type(k) is str and k.isidentifier() and not k.startswith('_') and not keyword.iskeyword(k) for k in first):
        return None
    kind = _record_types(msgspec, tuple(sorted(first)))
    try:
        index = msgspec.json.decode(data, type=kind)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return None
    return {'version': index.version, 'shards': index.shards}


@functools.lru_cache(maxsize=8)
def _record_types(msgspec: Any, keys: tuple[str, ...]) -> Any:
    """The ``msgspec`` type of an index whose shard entries have exactly ``keys`` (see :func:`_decode_records`)."""
    options = {'forbid_unknown_fields': True, 'gc': False}
    file = msgspec.defstruct('File', [('basename', Any), ('bytes', Any), ('hashes', Any)], **options)
    fields = [(k, Optional[file] if k.startswith(('raw_', 'zip_')) else Any) for k in keys]
    shard = msgspec.defstruct('Shard', fields, **options)
    return msgspec.defstruct('Index', [('version', Any), ('shards', list[shard])], gc=False)


def _getter(record: Any) -> Callable[[str], Callable[[Any], Any]]:
    """How a field of ``record`` (a dict from ``json``, or a record from :func:`_decode_records`) is read."""
    return attrgetter if hasattr(type(record), '__struct_fields__') else itemgetter


def _build_parsed(data: bytes, path: str, identity: str, version: int,
                  add_template: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    try:
        index = _parse(data)
    except (ValueError, RecursionError):
        return None
    if type(index) is not dict or index.get('version') != 2 or type(index.get('version')) is not int:
        return None
    shards = index.get('shards')
    if type(shards) is not list or not shards:
        return None
    fields = getattr(type(shards[0]), '__struct_fields__', None)
    if fields is not None:  # records (see _decode_records): one type, whose keys msgspec found in each entry
        get, keys = attrgetter, fields
    else:
        if set(map(type, shards)) != {dict} or len(set(map(tuple, shards))) != 1:
            return None
        get, keys = itemgetter, tuple(shards[0])
    if 'samples' not in keys:
        return None
    ordered = sorted(k for k in keys if k != 'samples')
    other_keys = [k for k in ordered if not k.startswith(('raw_', 'zip_'))]
    file_keys = [k for k in ordered if k.startswith(('raw_', 'zip_'))]
    n = len(shards)
    counts = _ints(list(map(get('samples'), shards)))
    if counts is None:
        return None
    for key in other_keys:  # one template: every other field equal to the first shard's
        column = list(map(get(key), shards))
        if column.count(column[0]) != n:
            return None
    slots: list[list[Any]] = []
    files: list[tuple[str, np.ndarray, list[str], list[list[str]]]] = []  # (key, sizes, names, hash columns)
    for key in file_keys:
        objs = list(map(get(key), shards))
        kinds = set(map(type, objs))
        if kinds == {type(None)}:
            slots.append([key, None])
            continue
        if len(kinds) != 1 or type(None) in kinds or (get is itemgetter and (
                kinds != {dict} or set(map(len, objs)) != {3})):
            return None
        field = _getter(objs[0])
        try:
            names = list(map(field('basename'), objs))
            sizes = _ints(list(map(field('bytes'), objs)))
            hashes = list(map(field('hashes'), objs))
        except KeyError:
            return None
        if sizes is None or set(map(type, names)) != {str} or set(map(type, hashes)) != {dict}:
            return None
        algos_seen = set(map(tuple, map(sorted, hashes)))
        if len(algos_seen) != 1:
            return None
        algos = list(next(iter(algos_seen)))
        if any(type(a) is not str for a in algos):
            return None
        if not _names_ok(names):
            return None
        columns = []
        for algo in algos:
            values = list(map(itemgetter(algo), hashes))
            if set(map(type, values)) != {str} or not _HEX.fullmatch(''.join(values)):
                return None
            columns.append(values)
        slots.append([key, algos])
        files.append((key, sizes, names, columns))
    return _assemble(shards, get, counts, other_keys, slots, files, path, identity, version, add_template)


def _assemble(shards: list[Any], get: Callable[[str], Callable[[Any], Any]], counts: np.ndarray,
              other_keys: list[str], slots: list[list[Any]],
              files: list[tuple[str, np.ndarray, list[str], list[list[str]]]], path: str, identity: str,
              version: int, add_template: Callable[..., Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The columns and header of a one-template index, as ``build_binary`` lays them out (``get``: how a field of
    a shard entry is read, see :func:`_getter`)."""
    n, nfiles = len(shards), len(files)
    templates: list[dict[str, Any]] = []
    add_template({key: get(key)(shards[0]) for key in other_keys}, slots, 0, path, templates, {})
    sizes = np.stack([f[1] for f in files], axis=1) if files else np.zeros((n, 0), np.int64)
    raw = [i for i, f in enumerate(files) if f[0][0] == 'r']
    raw_bytes = sizes[:, raw].sum(axis=1) if raw else np.zeros(n, np.int64)
    zip_bytes = sizes[:, [i for i in range(nfiles) if i not in raw]].sum(axis=1) if nfiles > len(raw) else \
        np.zeros(n, np.int64)
    per_file = [1 + len(f[3]) for f in files]  # strings per file: its name, then its hashes
    per_shard = sum(per_file)
    starts = np.concatenate([[0], np.cumsum(per_file)[:-1]]).astype(np.int64) if files else np.zeros(0, np.int64)
    base = np.arange(n, dtype=np.int64)[:, None] * per_shard
    file_name = (base + starts[None, :]).ravel()
    hash_offsets = np.array([starts[f] + 1 + a for f in range(nfiles) for a in range(len(files[f][3]))],
                            dtype=np.int64)  # in the order (file, algorithm) within a shard
    hash_str = (base + hash_offsets[None, :]).ravel()
    hashes_per_file = np.array([len(f[3]) for f in files], dtype=np.int64)
    hash_start = np.concatenate([[0], np.cumsum(np.tile(hashes_per_file, n))]) if files else np.zeros(1, np.int64)
    strings = [s for row in zip(*[c for f in files for c in (f[2], *f[3])]) for s in row]
    encoded = ''.join(strings).encode('utf-8')
    if len(encoded) == sum(map(len, strings)):
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    else:
        pieces = [s.encode('utf-8') for s in strings]
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    str_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    densest = _densest(counts, raw_bytes)
    templates[0]['densest'] = densest
    templates[0]['max_file_bytes'] = int(sizes.max()) if sizes.size else 0
    columns = {'samples': ArrayColumn(counts, '<i8'), 'template': ArrayColumn(np.zeros(n), '<i4'),
               'raw_bytes': ArrayColumn(raw_bytes, '<i8'), 'zip_bytes': ArrayColumn(zip_bytes, '<i8'),
               'file_start': ArrayColumn(np.arange(n + 1) * nfiles, '<i8'),
               'file_bytes': ArrayColumn(sizes.ravel(), '<i8'), 'file_name': ArrayColumn(file_name, '<i8'),
               'hash_start': ArrayColumn(hash_start, '<i8'), 'hash_str': ArrayColumn(hash_str, '<i8'),
               'str_off': ArrayColumn(str_off, '<i8'), 'str_blob': ArrayColumn(np.frombuffer(encoded, np.uint8),
                                                                               '|u1')}
    digest = hashlib.blake2b(digest_size=16)
    for name in ('samples', 'str_blob'):
        for chunk in columns[name].chunks():
            digest.update(chunk)
    header: dict[str, Any] = {'version': version, 'identity': identity, 'source': path, 'num_shards': n,
                              'templates': templates, 'layout': digest.hexdigest(), 'arrays': {}}
    relative = 0
    for name, column in columns.items():
        header['arrays'][name] = [column.dtype, relative, len(column)]
        relative += -(-column.nbytes // 8) * 8
    return header, columns


def _densest(counts: np.ndarray, raw: np.ndarray) -> int | None:
    """The first shard with the fewest raw bytes per sample (exact integer comparison), None when none has samples."""
    nonzero = np.flatnonzero(counts)
    if not len(nonzero):
        return None
    ratio = raw[nonzero] / counts[nonzero]
    best = float(ratio.min())
    candidates = nonzero[ratio <= best * (1 + 1e-9) + 1e-12]
    pick = int(candidates[0])
    same = (raw[candidates] == raw[pick]) & (counts[candidates] == counts[pick])
    for i in candidates[~same].tolist():
        if int(raw[i]) * int(counts[pick]) < int(raw[pick]) * int(counts[i]):
            pick = i
    return pick
