"""Walking a tar file's headers (never its member data) and grouping the members into WebDataset samples.

The walk reads 512-byte headers through a ``read(start, length) -> bytes`` function, so the same code indexes a
remote tar with ranged reads (:class:`WindowedReader` batches them) and opens a downloaded one through a memory map.
It understands what Python's :mod:`tarfile` and GNU tar write: ustar names with a prefix, POSIX pax headers (long
names, sizes beyond 8 GiB), GNU long names and base-256 sizes. It is stricter than :mod:`tarfile` where that only
hides damage: a bad header checksum, a member whose data runs past the end of the file or a file without the
end-of-archive block is a :class:`~streaming_core.errors.ShardCorruptError` naming the file and the member.

Grouping follows WebDataset (``webdataset.tariterators``): regular files only, members named ``__...__`` skipped,
the key is the member path up to the first dot of its last path component (directories included, so ``a/x.jpg`` and
``b/x.jpg`` are two samples) and the field is the rest, lowercased. Unlike WebDataset, which silently drops or
mis-groups them, a member that belongs to no sample, a field twice in one sample and a key that comes back after
another sample are :class:`TarLayoutError` naming the file and the member.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from streaming_core.plugin_api import IndexFormatError, ShardCorruptError

__all__ = ['BLOCK', 'Member', 'Sample', 'TarLayoutError', 'iter_members', 'group_samples', 'split_name',
           'WindowedReader']

#: The tar block size: headers are one block, member data is padded to whole blocks.
BLOCK = 512
_ZERO = bytes(BLOCK)
_HIGH = bytes(range(128, 256))
_REGULAR = (b'0', b'\0', b'7')
_KEY = re.compile(r'^((?:.*/|)[^.]+)[.]([^/]*)$')
_META = re.compile(r'__[^/]*__($|/)')

#: ``read(start, length) -> bytes``: up to ``length`` bytes of the tar from byte ``start``.
ReadAt = Callable[[int, int], bytes]


class TarLayoutError(IndexFormatError):
    """A tar is readable but not in WebDataset layout (a member of no sample, a duplicate field or key)."""


class Member(NamedTuple):
    """One regular file of a tar.

    Attributes:
        name: Its path inside the tar.
        offset: Where its data starts in the tar file.
        size: Its data's size in bytes.
    """

    name: str
    offset: int
    size: int


@dataclass
class Sample:
    """The members of one WebDataset sample.

    Attributes:
        key: The sample key (``dir/0001``).
        fields: ``(field, data offset, data size)`` per member, in tar order (``'jpg'``, ``'seg.png'``...).
    """

    key: str
    fields: list[tuple[str, int, int]]


def _text(field: bytes) -> str:
    return field.split(b'\0', 1)[0].decode('utf-8', 'surrogateescape')


def _number(field: bytes, shown: str, at: int, what: str) -> int:
    """A numeric header field: octal text, or GNU base-256 (first byte ``0x80``)."""
    if field[:1] == b'\x80':
        return int.from_bytes(field[1:], 'big')
    if field[:1] == b'\xff':
        raise ShardCorruptError(f'{shown}: the tar header at byte {at} has a negative {what}; the file is corrupt.')
    text = field.split(b'\0', 1)[0].strip(b' ')
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise ShardCorruptError(f'{shown}: the tar header at byte {at} has an unreadable {what} {text!r}; the file '
                                f'is corrupt or not a tar file.') from None


def _checksum_ok(block: bytes, shown: str, at: int) -> bool:
    try:
        stored = _number(block[148:156], shown, at, 'checksum')
    except ShardCorruptError:
        return False
    unsigned = sum(block) - sum(block[148:156]) + 256  # the checksum field counts as 8 spaces
    if stored == unsigned:
        return True
    high = BLOCK - len(block.translate(None, _HIGH)) - (8 - len(block[148:156].translate(None, _HIGH)))
    return stored == unsigned - 256 * high  # some old writers summed signed bytes


def _pax_records(data: bytes, shown: str, at: int) -> dict[str, str]:
    """The ``key=value`` records of a pax extended header."""
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data) and data[pos] != 0:
        space = data.find(b' ', pos)
        try:
            length = int(data[pos:space]) if space > pos else 0
        except ValueError:
            length = 0
        record = data[space + 1:pos + length]
        if length <= 0 or pos + length > len(data) or not record.endswith(b'\n') or b'=' not in record:
            raise ShardCorruptError(f'{shown}: the pax header at byte {at} is malformed; the file is corrupt.')
        key, _, value = record[:-1].partition(b'=')
        records[key.decode('utf-8', 'surrogateescape')] = value.decode('utf-8', 'surrogateescape')
        pos += length
    return records


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _check_nothing_after(read: ReadAt, pos: int, size: int, shown: str) -> None:
    """Past the end-of-archive block a tar holds only zeros (its record padding). Data there is another tar
    appended with ``cat`` (which ``tar`` and WebDataset stop before, silently): refused, never left out. Only the
    first MiB is looked at: the appended tar starts right after the record padding."""
    rest = read(pos, min(size - pos, 1 << 20))
    if rest.strip(b'\0'):
        where = pos + len(rest) - len(rest.lstrip(b'\0'))
        raise ShardCorruptError(f'{shown} holds data at byte {where}, after its end-of-archive block at byte {pos}: '
                                f'tars joined with `cat`? Readers stop at the first end block, so those members '
                                f'would be left out. Write one tar (`tar --concatenate`, or write the samples again).')


def iter_members(read: ReadAt, size: int, shown: str) -> Iterator[Member]:
    """The regular files of a tar of ``size`` bytes, from its headers, in tar order.

    Args:
        read: Reads a byte range of the tar.
        size: The tar's size in bytes.
        shown: The file's name for messages.

    Raises:
        ShardCorruptError: naming the file (and the member, when known): not a tar, a bad header, a member running
            past the end of the file, no end-of-archive block, data after it (tars joined with ``cat``), or a sparse
            member (unsupported).
    """
    if size < BLOCK:
        raise ShardCorruptError(f'{shown}: {size} bytes is not a tar file (a tar holds at least one {BLOCK}-byte '
                                f'block); the file is empty or truncated.')
    pos = 0
    last = None  # the previous member's name, for messages
    long_name: str | None = None
    pax: dict[str, str] = {}
    while True:
        if pos + BLOCK > size:
            after = f' (after member {last!r})' if last is not None else ''
            raise ShardCorruptError(f'{shown} is truncated: it ends at byte {size}{after} without the tar '
                                    f'end-of-archive block. Write the tar again or remove it.')
        block = read(pos, BLOCK)
        if len(block) != BLOCK:
            raise ShardCorruptError(f'{shown}: read {len(block)} of the {BLOCK} header bytes at byte {pos} (the '
                                    f'file changed or is truncated).')
        if block == _ZERO:
            _check_nothing_after(read, pos, size, shown)
            return
        if not _checksum_ok(block, shown, pos):
            after = f' (after member {last!r})' if last is not None else ''
            what = 'is not a tar file' if pos == 0 else f'has a corrupt tar header at byte {pos}{after}'
            raise ShardCorruptError(f'{shown} {what} (header checksum mismatch).')
        kind = block[156:157]
        name = _text(block[0:100])
        if block[345] and kind not in (b'L', b'K', b'S'):
            name = _text(block[345:500]) + '/' + name
        member_size = _number(block[124:136], shown, pos, 'size')
        if pax and 'size' in pax:
            try:
                member_size = int(pax['size'])
            except ValueError:
                raise ShardCorruptError(f'{shown}: the pax header before byte {pos} has a bad size '
                                        f'{pax["size"]!r}.') from None
        if long_name is not None:
            name = long_name
        if pax and 'path' in pax:
            name = pax['path']
        data = pos + BLOCK
        if data + member_size > size:
            raise ShardCorruptError(f'{shown} is truncated: member {name!r} needs {member_size} bytes from byte '
                                    f'{data} but the file ends at byte {size}. Write the tar again or remove it.')
        following = data + _padded(member_size)
        if kind == b'x':
            pax = _pax_records(read(data, member_size), shown, pos)
            if any(key.startswith('GNU.sparse') for key in pax):
                raise ShardCorruptError(f'{shown}: a sparse member follows byte {pos}; sparse tar members are not '
                                        f'supported (write the tar without --sparse).')
        elif kind in (b'L', b'K'):
            text = _text(read(data, member_size))
            if kind == b'L':
                long_name = text
        elif kind == b'g':
            pass  # global pax headers carry no member data
        elif kind == b'S':
            raise ShardCorruptError(f'{shown}: member {name!r} is a sparse file; sparse tar members are not '
                                    f'supported (write the tar without --sparse).')
        else:
            if kind in _REGULAR and not (kind == b'\0' and name.endswith('/')):
                yield Member(name, data, member_size)
            last = name
            if long_name is not None or pax:
                long_name, pax = None, {}
        pos = following


def split_name(name: str) -> tuple[str, str] | None:
    """``(key, field)`` of a member name as WebDataset splits it (the field lowercased), or None (no sample)."""
    if '/' not in name:  # the common case, without the regular expression (same result)
        stem, dot, rest = name.partition('.')
        return (stem, rest.lower()) if dot and stem else None
    match = _KEY.match(name)
    if match is None:
        return None
    return match.group(1), match.group(2).lower()


def group_samples(members: Iterator[Member], shown: str) -> list[Sample]:
    """Group members into samples in tar order (see the module docstring).

    Raises:
        TarLayoutError: a member belongs to no sample, a field repeats within a sample, or a key comes back.
        ShardCorruptError: from the header walk.
    """
    samples: list[Sample] = []
    seen: set[str] = set()
    current: Sample | None = None
    fields: set[str] = set()
    for member in members:
        if _META.match(member.name):
            continue
        parts = split_name(member.name)
        if parts is None:
            raise TarLayoutError(f'{shown}: member {member.name!r} belongs to no sample (WebDataset names members '
                                 f'KEY.FIELD, with a dot in the last path component). Remove it from the tar or '
                                 f'rename it.')
        key, field = parts
        if current is None or key != current.key:
            if key in seen:
                raise TarLayoutError(f'{shown}: member {member.name!r} repeats the key {key!r} of an earlier sample '
                                     f'after other samples (duplicate key); the members of one sample must be '
                                     f'adjacent and keys unique within a tar.')
            seen.add(key)
            current = Sample(key, [])
            samples.append(current)
            fields = set()
        if field in fields:
            raise TarLayoutError(f'{shown}: member {member.name!r} repeats the field {field!r} of sample {key!r} '
                                 f'(duplicate file name in one sample).')
        fields.add(field)
        current.fields.append((field, member.offset, member.size))
    return samples


class WindowedReader:
    """Ranged reads of one remote file for the header walk, batched into windows.

    A header read outside the current window fetches a new one starting there. Windows double (up to ``largest``)
    while the walk moves forward through small members, so a tar of small files costs a few large requests; after a
    jump over a large member the window shrinks back, so large members' data is never downloaded.

    Args:
        read: ``read(name, start, length)``, the index builder's ranged read.
        name: The file's name for ``read``.
        size: The file's size.
        smallest: The first (and smallest) window in bytes.
        largest: The largest window in bytes.
    """

    def __init__(self, read: Callable[[str, int, int], bytes], name: str, size: int, *, smallest: int = 64 << 10,
                 largest: int = 8 << 20) -> None:
        self._read = read
        self._name = name
        self._size = size
        self._smallest = smallest
        self._largest = largest
        self._window = smallest
        self._start = 0
        self._buf = b''
        #: Requests made and bytes fetched (for tests and the docs' cost figures).
        self.requests = 0
        self.fetched = 0

    def __call__(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``start``."""
        end = min(start + length, self._size)
        if self._start <= start and end <= self._start + len(self._buf):
            return self._buf[start - self._start:end - self._start]
        gap = start - (self._start + len(self._buf))
        if 0 <= gap < self._window:
            self._window = min(self._largest, self._window * 2)
        else:
            self._window = self._smallest
        count = min(max(length, self._window), self._size - start)
        self._buf = self._read(self._name, start, count)
        self._start = start
        self.requests += 1
        self.fetched += len(self._buf)
        return self._buf[:end - start]
