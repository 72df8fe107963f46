"""The binary, node-shared form of a stream's ``index.json``: built once per node, memory-mapped by every process.

Parsing a big ``index.json`` and building one reader object per shard dominates start-up at 10^5-10^6 shards. The
first process of a node that needs an index version converts it into a compact columnar file in the stream's state
directory (:func:`streaming_core.common.paths.state_dir`), keyed by the index source identity
(:class:`streaming_core.reading.index_sync.SyncedIndex`); every other rank and DataLoader worker maps it read-only.

The file holds, per shard, its sample count, its raw and compressed byte totals and a *template id*; per file of a
shard, its size, its name and its hash values (offsets into one string table). A template is a shard entry minus its
per-shard fields (``samples`` and the ``raw_*``/``zip_*`` file objects): format, column layout, compression...; an
index usually has one. A shard's entry is rebuilt exactly (the dict
:func:`streaming_core.reading.index_file.shard_readers` would have used) from its template and its per-shard fields, so
every format plugin reads it unchanged; the reader is created on first touch
(:class:`~streaming_core.reading.shard_table.ShardTable`, the mapped view; re-exported here).

Layout: ``MAGIC``, a little-endian ``u64`` header length, the header (JSON: identity, templates, and each array's
dtype, offset and length), the arrays (8-byte aligned), then a trailer: the ``xxh3_64`` of everything before it and
``END_MAGIC``. A file of the wrong size, with a bad checksum, magic or identity, is never trusted: it is rebuilt.
Files are written to a temporary name and renamed into place, so a process killed while writing leaves nothing a
later process trusts; building takes an exclusive kernel-released lock, so the processes of a node build once.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import mmap
import os
import re
import struct
import tempfile
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import IndexFormatError
from streaming_core.reading.index_file import FileInfo, check_basename
from streaming_core.reading.shard_table import ShardTable
from streaming_core.storage.verified_files import RECORD_MARGIN_NS, record_path, vouch, vouched, xxh3_checksum

__all__ = ['MAGIC', 'END_MAGIC', 'FORMAT_VERSION', 'BinaryIndexError', 'build_binary', 'binary_path', 'open_binary',
           'write_binary', 'ShardTable', 'KEEP_VERSIONS', 'Column', 'SPILL_BYTES', 'record_path', 'RECORD_MARGIN_NS']

logger = logging.getLogger('streaming_core.reading.binary_index')

MAGIC = b'SCBINDX1'
END_MAGIC = b'SCBIEND1'
FORMAT_VERSION = 2
#: How many binary index versions a state directory keeps (a job still running on an older index version may
#: start workers that map it).
KEEP_VERSIONS = 4
#: Bytes a column being built keeps in memory before spilling to disk.
SPILL_BYTES = 1 << 20
_U64 = struct.Struct('<Q')
_TRAILER = 16


class BinaryIndexError(Exception):
    """A binary index file is absent, truncated, corrupt or of another identity (callers rebuild it)."""


def _check_file(obj: Any, path: str, shard: int, key: str) -> tuple[str, int, dict[str, str]]:
    """Fast structural check of a file object; any doubt goes through :meth:`FileInfo.from_json` (its errors, which
    name ``path``, the shard and the key)."""
    if type(obj) is dict and len(obj) == 3:
        name, size, hashes = obj.get('basename'), obj.get('bytes'), obj.get('hashes')
        if type(name) is str and type(size) is int and 0 <= size <= _MAX_INT64 and type(hashes) is dict:
            try:
                ''.join(hashes)  # every algorithm name a string
                plain = _HEXCHARS.issuperset(''.join(hashes.values()))
            except TypeError:  # a key or value that is not a string
                plain = False
            if plain:
                if not _SAFE_NAME.match(name):
                    check_basename(name, f'{path} shard {shard} {key}')
                return name, size, hashes
    where = f'{path} shard {shard} {key}'
    info = FileInfo.from_json(obj, where)
    if info.bytes > _MAX_INT64:
        raise IndexFormatError(f'{where}: "bytes" {info.bytes} is larger than any file can be.')
    return info.basename, info.bytes, dict(info.hashes)


_HEXCHARS = frozenset('0123456789abcdef')
_MAX_INT64 = (1 << 63) - 1
#: Names that :func:`check_basename` accepts without a look: ASCII components of letters, digits, ``_``, ``-`` and
#: ``.``, none empty, none starting with a dot (so no ``.`` or ``..``); anything else gets the full check.
_SAFE_NAME = re.compile(r'[A-Za-z0-9_-][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*\Z')


def build_binary(index: Mapping[str, Any] | Iterable[Mapping[str, Any]], path: str, identity: str,
                 spill_dir: str | None = None) -> tuple[dict[str, Any], dict[str, Column]]:
    """The header and columns of the binary form of an index (write them with :func:`write_binary`).

    Args:
        index: The parsed index (``parse_index_text``'s result), or an iterable of its shard entries (such as
            :func:`streaming_core.reading.index_file_stream.iter_index_entries` streams from a file, in bounded memory:
            the tables grow in compact arrays, about 100 bytes per shard, never one Python object per shard).
        path: The ``index.json`` it came from (named in errors).
        identity: The index source identity recorded in the header.
        spill_dir: Where columns that outgrow their in-memory buffer spill (anonymous files, gone when closed or
            when the process dies): memory stays bounded whatever the number of shards. Default: the system's
            temporary directory.

    Raises:
        IndexFormatError: an entry is malformed (naming the file and the shard).
    """
    entries = index['shards'] if isinstance(index, Mapping) else index
    samples, template_ids = Column('q', spill_dir), Column('i', spill_dir)
    raw_bytes, zip_bytes, file_start = Column('q', spill_dir), Column('q', spill_dir), Column('q', spill_dir)
    file_bytes, file_name = Column('q', spill_dir), Column('q', spill_dir)
    hash_start, hash_str = Column('q', spill_dir, [0]), Column('q', spill_dir)
    str_off, blob = Column('q', spill_dir, [0]), Column('B', spill_dir)
    templates: list[dict[str, Any]] = []
    template_of: dict[str, int] = {}
    layouts: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}  # entry keys -> (other keys, file slots)
    last: tuple[Any, Any, int] | None = None
    stats: list[list[int]] = []  # per template: [shard of least raw bytes per sample, its raw, its count, max file]
    files = strings = hash_count = blob_size = 0  # len(file_bytes), len(str_off) - 1, len(hash_str), len(blob)
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise IndexFormatError(f'Index file at {path}: "shards" must be a list of objects (shard {i} is '
                                   f'{type(entry).__name__}).')
        count = entry.get('samples')
        if type(count) is not int or not 0 <= count <= _MAX_INT64:
            raise IndexFormatError(f'{path} shard {i}: "samples" must be a non-negative integer that a shard can '
                                   f'hold, got {count!r}.')
        samples.append(count)
        keys = tuple(entry)
        layout = layouts.get(keys)
        if layout is None:
            ordered = sorted(k for k in keys if k != 'samples')
            layout = layouts[keys] = ([k for k in ordered if not k.startswith(('raw_', 'zip_'))],
                                      [k for k in ordered if k.startswith(('raw_', 'zip_'))])
        rest = {key: entry[key] for key in layout[0]}
        slots: list[list[Any]] = []
        file_start.append(files)
        raw_total = zip_total = biggest = 0
        for key in layout[1]:
            value = entry[key]
            if value is None:
                slots.append([key, None])
                continue
            name, size, hashes = _check_file(value, path, i, key)
            algos = sorted(hashes)
            slots.append([key, algos])
            file_bytes.append(size)
            files += 1
            if size > biggest:
                biggest = size
            file_name.append(strings)
            encoded = name.encode('utf-8')
            blob.extend(encoded)
            blob_size += len(encoded)
            strings += 1
            str_off.append(blob_size)
            for algo in algos:
                hash_str.append(strings)
                encoded = hashes[algo].encode('ascii')
                blob.extend(encoded)
                blob_size += len(encoded)
                strings += 1
                str_off.append(blob_size)
            hash_count += len(algos)
            hash_start.append(hash_count)
            if key[0] == 'r':
                raw_total += size
            else:
                zip_total += size
        raw_bytes.append(raw_total)
        zip_bytes.append(zip_total)
        if last is not None and last[0] == rest and last[1] == slots:  # usually every shard shares one template
            template_ids.append(last[2])
        else:
            last = _add_template(rest, slots, i, path, templates, template_of)
            template_ids.append(last[2])
            while len(stats) < len(templates):
                stats.append([-1, 0, 0, 0])
        stat = stats[last[2]]
        if count and (stat[0] < 0 or raw_total * stat[2] < stat[1] * count):
            stat[0], stat[1], stat[2] = i, raw_total, count
        if biggest > stat[3]:
            stat[3] = biggest
        if i % 4096 == 4095:
            for column in (samples, template_ids, raw_bytes, zip_bytes, file_start, file_bytes, file_name,
                           hash_start, hash_str, str_off, blob):
                column.maybe_spill()
    file_start.append(len(file_bytes))
    for template, stat in zip(templates, stats, strict=True):  # the format limits are checked from these alone
        template['densest'] = stat[0] if stat[0] >= 0 else None
        template['max_file_bytes'] = stat[3]
    columns = {'samples': samples, 'template': template_ids, 'raw_bytes': raw_bytes, 'zip_bytes': zip_bytes,
               'file_start': file_start, 'file_bytes': file_bytes, 'file_name': file_name, 'hash_start': hash_start,
               'hash_str': hash_str, 'str_off': str_off, 'str_blob': blob}
    digest = hashlib.blake2b(digest_size=16)
    for column in (samples, blob):
        for chunk in column.chunks():
            digest.update(chunk)
    header: dict[str, Any] = {'version': FORMAT_VERSION, 'identity': identity, 'source': path,
                              'num_shards': len(samples), 'templates': templates, 'layout': digest.hexdigest(),
                              'arrays': {}}
    relative = 0  # array offsets are relative to the end of the (padded) header
    for name, column in columns.items():
        header['arrays'][name] = [column.dtype, relative, len(column)]
        relative += -(-column.nbytes // 8) * 8
    return header, columns


def _add_template(rest: dict[str, Any], slots: list[list[Any]], shard: int, path: str,
                  templates: list[dict[str, Any]], template_of: dict[str, int]) -> tuple[Any, Any, int]:
    """The template id of a shard whose template differs from the previous shard's (added when new)."""
    try:
        key_text = json.dumps([rest, slots], sort_keys=True)
    except (TypeError, ValueError) as err:
        raise IndexFormatError(f'{path} shard {shard}: the entry is not plain JSON ({err}).') from err
    tid = template_of.get(key_text)
    if tid is None:
        tid = template_of[key_text] = len(templates)
        templates.append({'entry': rest, 'slots': slots, 'first': shard})
    return rest, slots, tid


def _serialize(handle: Any, header: dict[str, Any], columns: Mapping[str, Column]) -> None:
    """Write the file layout (see the module doc) to ``handle``, hashing as it goes."""
    import xxhash  # when a checksum is computed: not on import, not on a vouched warm open
    hasher = xxhash.xxh3_64()

    def put(data: Any) -> None:
        hasher.update(data)
        handle.write(data)

    header_bytes = json.dumps(header, sort_keys=True).encode('utf-8')
    head = MAGIC + _U64.pack(len(header_bytes)) + header_bytes
    put(head + bytes(-len(head) % 8))
    for column in columns.values():
        for chunk in column.chunks():
            put(chunk)
        if column.nbytes % 8:
            put(bytes(-column.nbytes % 8))
    handle.write(_U64.pack(hasher.intdigest()) + END_MAGIC)


class Column:
    """An append-only column of fixed-size values (``array`` type code) that spills to an anonymous file beyond
    :data:`SPILL_BYTES` in memory.

    Args:
        typecode: ``'q'`` (int64), ``'i'`` (int32) or ``'B'`` (bytes).
        spill_dir: Where the spill file is created (and at once unlinked).
        initial: First values.
    """

    _DTYPES = {'q': '<i8', 'i': '<i4', 'B': '|u1'}

    def __init__(self, typecode: str, spill_dir: str | None = None, initial: Sequence[int] = ()) -> None:
        self.typecode = typecode
        self.dtype = self._DTYPES[typecode]
        self._buf = array(typecode, initial)
        self._spill_dir = spill_dir
        self._file: Any = None
        self._spilled = 0  # values written to the spill file
        self.append = self._buf.append
        self.extend = self._buf.frombytes if typecode == 'B' else self._buf.extend

    def __len__(self) -> int:
        return self._spilled + len(self._buf)

    @property
    def nbytes(self) -> int:
        """The column's size in bytes."""
        return len(self) * self._buf.itemsize

    def maybe_spill(self) -> None:
        """Move the in-memory values to the spill file when they exceed :data:`SPILL_BYTES`."""
        if len(self._buf) * self._buf.itemsize < SPILL_BYTES:
            return
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self._spill_dir, prefix='binary-index-spill-')
        self._buf.tofile(self._file)
        self._spilled += len(self._buf)
        del self._buf[:]

    def chunks(self) -> Iterator[bytes]:
        """The column's bytes, in order, in pieces of at most :data:`SPILL_BYTES`."""
        if self._file is not None:
            self._file.seek(0)
            remaining = self._spilled * self._buf.itemsize
            while remaining:
                chunk = self._file.read(min(SPILL_BYTES, remaining))
                remaining -= len(chunk)
                yield chunk
        if len(self._buf):
            yield self._buf.tobytes()

    def close(self) -> None:
        """Drop the spill file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def binary_path(state_directory: str, identity: str) -> str:
    """Where the binary index of one index version lives in a state directory."""
    key = hashlib.blake2s(identity.encode('utf-8'), digest_size=12).hexdigest()
    return os.path.join(state_directory, f'index-{key}.bin')


def write_binary(path: str, header: dict[str, Any], columns: Mapping[str, Column]) -> None:
    """Write a binary index (:func:`build_binary`'s result) to ``path`` atomically (temporary name, fsync, rename)
    and keep at most :data:`KEEP_VERSIONS` binary indexes in its directory (the most recently written)."""
    from streaming_core.storage.facade import temp_name
    tmp = temp_name(path)
    try:
        with open(tmp, 'wb') as handle:
            _serialize(handle, header, columns)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    directory = os.path.dirname(path)
    versions = []
    for name in os.listdir(directory):
        if name.startswith('index-') and name.endswith('.bin'):
            try:
                versions.append((os.path.getmtime(os.path.join(directory, name)), name))
            except OSError:
                pass
    for _, name in sorted(versions, reverse=True)[KEEP_VERSIONS:]:
        if os.path.join(directory, name) != path:
            for victim in (os.path.join(directory, name), record_path(os.path.join(directory, name))):
                try:
                    os.remove(victim)
                except OSError:
                    pass


def _checksum(handle: Any, length: int) -> int:
    """``xxh3_64`` of the first ``length`` bytes (see :func:`streaming_core.storage.verified_files.xxh3_checksum`)."""
    return xxh3_checksum(handle, length)


def _recorded(path: str, stat: os.stat_result, stored: int) -> bool:
    """Whether the record beside ``path`` vouches for this very file version (see
    :func:`streaming_core.storage.verified_files.vouched`)."""
    return vouched(path, stat, stored, RECORD_MARGIN_NS)


def _write_record(path: str, stat: os.stat_result, checksum: int) -> None:
    """Record that the file version ``stat`` describes was verified (see
    :func:`streaming_core.storage.verified_files.vouch`)."""
    vouch(path, stat, checksum, RECORD_MARGIN_NS)


def open_binary(path: str, identity: str | None) -> tuple[dict[str, Any], dict[str, NDArray[Any]], Any]:
    """Map a binary index read-only after checking its size, magic, checksum and identity.

    The checksum of the whole file is computed once per file version and node: a verification record beside it
    (:func:`record_path`: device, inode, size, mtime and ctime of the file, its checksum, when it was verified)
    lets later opens skip it while the file's ``stat`` still matches; a record that does not match is ignored and
    the file checked again. The size, magic, header and identity are checked on every open.

    Returns:
        ``(header, arrays, mapping)``: the arrays are views of the mapping.

    Raises:
        BinaryIndexError: the file is absent, truncated, corrupt or of another identity.
    """
    try:
        with open(path, 'rb') as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            if size < len(MAGIC) + 8 + _TRAILER:
                raise BinaryIndexError(f'{path}: {size} bytes, too short for a binary index (truncated).')
            mm = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                (trailer,) = _U64.unpack_from(mm, size - _TRAILER)
                vouched = _recorded(path, stat, trailer)
                actual = trailer if vouched else _checksum(handle, size - _TRAILER)
            except BaseException:
                mm.close()
                raise
    except FileNotFoundError:
        raise BinaryIndexError(f'{path} does not exist.') from None
    except OSError as err:
        raise BinaryIndexError(f'{path}: {err}') from err
    try:
        end = size - _TRAILER
        if mm[:8] != MAGIC or mm[end + 8:] != END_MAGIC:
            raise BinaryIndexError(f'{path}: bad magic (not a binary index, or truncated).')
        (stored,) = _U64.unpack_from(mm, end)
        if actual != stored:
            raise BinaryIndexError(f'{path}: checksum mismatch (corrupt).')
        if not vouched:
            _write_record(path, stat, actual)
        (header_len,) = _U64.unpack_from(mm, 8)
        header = json.loads(mm[16:16 + header_len])
        if header.get('version') != FORMAT_VERSION:
            raise BinaryIndexError(f'{path}: binary index version {header.get("version")!r}, expected '
                                   f'{FORMAT_VERSION}.')
        if identity is not None and header.get('identity') != identity:
            raise BinaryIndexError(f'{path}: built for index {header.get("identity")!r}, not {identity!r}.')
        data_start = -(-(16 + header_len) // 8) * 8
        arrays = {}
        for name, (dtype, offset, count) in header['arrays'].items():
            arrays[name] = np.frombuffer(mm, dtype=np.dtype(dtype), count=count, offset=data_start + offset)
    except BinaryIndexError:
        arrays = {}
        mm.close()
        raise
    except (ValueError, KeyError, TypeError, struct.error) as err:
        arrays = {}  # drop the views of the mapping so it can close
        try:
            mm.close()
        except BufferError:  # a view escaped into the exception's frames: the mapping closes when they go
            pass
        raise BinaryIndexError(f'{path}: unreadable header ({err}).') from err
    return header, arrays, mm


def load_or_build(stream: Any, synced: Any, allow_unsafe_types: bool, timeout: float) -> ShardTable:
    """The mapped binary index of ``synced`` (a :class:`~streaming_core.reading.index_sync.SyncedIndex`) for ``stream``,
    built under the state directory's lock by the first process of the node that needs it.

    Raises:
        IndexFormatError: the index is invalid (naming the file and the shard).
    """
    from streaming_core.common.paths import state_dir
    sdir = state_dir(stream.local_dir)
    path = binary_path(sdir, synced.identity)
    try:
        header, arrays, mm = open_binary(path, synced.identity)
        return ShardTable(stream, path, header, arrays, mm, allow_unsafe_types)
    except BinaryIndexError as err:
        logger.debug('binary index not usable: %s', err)
    from streaming_core.reading.binary_index_fast import build_parsed  # only a process that may build imports these
    from streaming_core.reading.index_file_stream import iter_index_entries
    from streaming_core.storage.locking import RangeLocks
    locks = RangeLocks.for_path(os.path.join(sdir, 'binary-index.lock'))
    locks.acquire(0, True, timeout, f'the binary index build of {synced.path}')
    built = False
    try:
        try:
            header, arrays, mm = open_binary(path, synced.identity)
        except BinaryIndexError as err:
            if os.path.exists(path):
                logger.warning('rebuilding the binary index of %s: %s', synced.path, err)
            start = time.perf_counter()
            fast = build_parsed(synced.data, synced.path, synced.identity, version=FORMAT_VERSION,
                                add_template=_add_template)  # a small one-template index
            header, columns = fast if fast is not None else build_binary(
                iter_index_entries(io.BytesIO(synced.data), synced.path), synced.path, synced.identity,
                spill_dir=sdir)
            try:
                write_binary(path, header, columns)
            finally:
                for column in columns.values():
                    column.close()
            logger.info('built the binary index of %s (%d shards) in %.2f s', synced.path, header['num_shards'],
                        time.perf_counter() - start)
            built = True
            header, arrays, mm = open_binary(path, synced.identity)
            table = ShardTable(stream, path, header, arrays, mm, allow_unsafe_types, built_here=True)
            from streaming_core.reading.shard_files import check_distinct_files
            check_distinct_files(table)  # under the lock: a process waiting for it never maps a refused index
            return table
    finally:
        locks.release(0)
    return ShardTable(stream, path, header, arrays, mm, allow_unsafe_types, built_here=built)
