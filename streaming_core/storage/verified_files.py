"""Checksums of local files verified once per file version and node (binary indexes, epoch plans).

A file ends with the checksum of what precedes it. Computing it means reading the whole file, so each process
would pay for it on every open: a verification record beside the file (``<path>.verified``: device, inode, size,
mtime and ctime of the verified version, its checksum, when it was verified) lets later opens skip it while the
file's ``stat`` still matches. A record that does not match is ignored and the file checked again; a record is
written only for a file last changed at least a margin before it was verified, so a change within the file
system's timestamp granularity is never vouched for.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from streaming_core.storage.facade import temp_name

__all__ = ['xxh3_checksum', 'record_path', 'vouched', 'vouch', 'checksum_vouched', 'RECORD_MARGIN_NS']

#: A verification record is trusted only for a file last modified at least this long before it was verified.
RECORD_MARGIN_NS = 1_000_000_000


def xxh3_checksum(handle: Any, length: int) -> int:
    """``xxh3_64`` of the first ``length`` bytes of the open binary file ``handle``, read in chunks (through a
    mapping, every page would count in this process's resident memory; read, they stay in the page cache only)."""
    import xxhash  # when a checksum is computed: not on import, not on a vouched warm open
    hasher = xxhash.xxh3_64()
    handle.seek(0)
    buf = bytearray(max(1, min(length, 1 << 22)))  # a small file must not pay for zeroing 4 MB
    view = memoryview(buf)
    remaining = length
    while remaining:
        got = handle.readinto(view[:min(len(buf), remaining)])
        if not got:
            break
        hasher.update(view[:got])
        remaining -= got
    return hasher.intdigest()


def record_path(path: str) -> str:
    """Where the verification record of the file at ``path`` lives (beside it)."""
    return path + '.verified'


def _stamp(stat: os.stat_result, times: bool = True) -> list[int]:
    stamp = [stat.st_dev, stat.st_ino, stat.st_size]
    return stamp + [stat.st_mtime_ns, stat.st_ctime_ns] if times else stamp


def vouched(path: str, stat: os.stat_result, stored: int, margin: int = RECORD_MARGIN_NS,
            times: bool = True) -> bool:
    """Whether the record beside ``path`` vouches for this very file version (same device, inode, size, mtime and
    ctime, and the checksum ``stored``), verified at least ``margin`` ns after its last change. ``times=False``: a
    file only ever replaced by a rename (a new inode), whose times its users change (the plan cache's use marks)."""
    try:
        with open(record_path(path), encoding='utf-8') as f:
            record = json.load(f)
        stamp, checksum, verified = record['stamp'], record['checksum'], record['verified_ns']
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not times:
        return stamp == _stamp(stat, False) and checksum == stored
    return (stamp == _stamp(stat) and checksum == stored and isinstance(verified, int)
            and verified - max(stat.st_mtime_ns, stat.st_ctime_ns) >= margin)


def vouch(path: str, stat: os.stat_result, checksum: int, margin: int = RECORD_MARGIN_NS, times: bool = True) -> None:
    """Record that the file version ``stat`` describes has the checksum ``checksum`` (atomically; failing to write
    is no error); only for a file last changed at least ``margin`` ns ago (any time with ``times=False``)."""
    now = time.time_ns()
    if times and now - max(stat.st_mtime_ns, stat.st_ctime_ns) < margin:
        return
    target = record_path(path)
    tmp = temp_name(target)
    try:
        with open(tmp, 'w', encoding='utf-8') as f:
            json.dump({'stamp': _stamp(stat, times), 'checksum': checksum, 'verified_ns': now}, f)
        os.replace(tmp, target)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass


def checksum_vouched(handle: Any, path: str, stat: os.stat_result, length: int, stored: int,
                     times: bool = True) -> bool:
    """Whether the first ``length`` bytes of the file at ``path`` (open as ``handle``, ``stat`` its ``fstat``) have
    the checksum ``stored``: from its verification record, or computed (and then recorded). ``times``: see
    :func:`vouched`."""
    if vouched(path, stat, stored, times=times):
        return True
    if xxh3_checksum(handle, length) != stored:
        return False
    vouch(path, stat, stored, times=times)
    return True
