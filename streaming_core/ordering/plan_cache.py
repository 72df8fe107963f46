"""Epoch plans computed once per node and shared through memory-mapped files.

The first process of a node that needs an epoch's plan computes its node's share (``planner.plan_node``) under
a kernel-released lock and writes it atomically to ``<cache root>/plans/<key>.npy``; every other rank and worker
of the node maps that file. The key covers everything the plan depends on, so a file is never stale. There is no
barrier: a process that finds the file simply uses it.

The directory is bounded: whenever a plan is written, the plans beyond the :data:`MAX_PLANS` most recently used
(or beyond :data:`MAX_PLAN_BYTES` in total, or unused for :data:`MAX_PLAN_AGE`) are removed, except the ones a live
process holds. Each process holds a shared "in use" lock (one byte of ``plans.lock`` per plan key, released by the
kernel when the process dies) on the last :data:`PLANS_HELD_PER_PROCESS` plans it loaded; pruning removes a file
only after taking that byte exclusively.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import time
import zlib
from collections import OrderedDict
from dataclasses import fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.common.fork_safe import ForkSafeLock
from streaming_core.common.paths import coordination_dir
from streaming_core.errors import WaitTimeoutError
from streaming_core.storage.facade import temp_name
from streaming_core.storage.locking import RangeLocks
from streaming_core.storage.verified_files import checksum_vouched, record_path, xxh3_checksum

__all__ = ['plan_key', 'node_plan', 'prune_plans', 'PLAN_LOCK_TIMEOUT', 'MAX_PLAN_AGE', 'MAX_PLANS', 'MAX_PLAN_BYTES',
           'PLANS_HELD_PER_PROCESS']

logger = logging.getLogger('streaming_core.ordering.plan_cache')

#: How long a process waits for another process of its node to compute a plan.
PLAN_LOCK_TIMEOUT = 1800.0
#: Plan files unused for this long (seconds) are removed when a new plan is written (unless held).
MAX_PLAN_AGE = 6 * 3600
#: At most this many plan files are kept (the most recently used; more only while live processes hold them).
MAX_PLANS = 64
#: The plan files kept take at most this many bytes in total (the most recent one is always kept).
MAX_PLAN_BYTES = 2 << 30
#: How many of the plans it loaded last a process marks as in use.
PLANS_HELD_PER_PROCESS = 16
_LOCK_BYTES = 1 << 20  # bytes [0, _LOCK_BYTES): "computing" locks; [_LOCK_BYTES, 2 * _LOCK_BYTES): "in use" locks
_HOLD_TIMEOUT = 10.0
#: The plan file format, in the key: files of another format (before the checksum trailer) are never looked up.
PLAN_FORMAT = 3
_corrupt_seen: set[str] = set()

_held: 'OrderedDict[tuple[str, int], RangeLocks]' = OrderedDict()
_held_pid = os.getpid()
_held_mutex = ForkSafeLock()  # a forked child never inherits it held


def plan_key(planner: Any, world: Any, epoch: int, sample_in_epoch: int, node: int) -> str:
    """A digest of every input of a node's plan."""
    digest = hashlib.blake2b(digest_size=16)
    for field in fields(planner):
        value = getattr(planner, field.name)
        if isinstance(value, np.ndarray):
            digest.update(field.name.encode() + b'=' + str(value.dtype).encode() + value.tobytes())
        else:
            digest.update(f'{field.name}={value!r};'.encode())
    digest.update(f'world={world.num_nodes},{world.ranks_per_node},{world.workers_per_rank};'.encode())
    digest.update(f'epoch={epoch};start={sample_in_epoch};node={node};format={PLAN_FORMAT}'.encode())
    return digest.hexdigest()


def node_plan(planner: Any, world: Any, epoch: int, sample_in_epoch: int, node: int,
              share: bool = True) -> NDArray[np.int64]:
    """This node's plan ``(ranks_per_node, workers_per_rank, batches, batch_size)``, computed once per node.

    The planner's :meth:`~streaming_core.ordering.planner.EpochPlanner.warn` runs for every call, whether the plan is
    computed here (``plan_node`` warns) or read from the node's plan cache.
    """
    if not share:
        return planner.plan_node(world, epoch, sample_in_epoch, node)
    try:
        directory = coordination_dir('plans')
    except OSError as err:
        logger.warning('Cannot share epoch plans (%s); computing in this process.', err)
        return planner.plan_node(world, epoch, sample_in_epoch, node)
    key = plan_key(planner, world, epoch, sample_in_epoch, node)
    path = os.path.join(directory, f'{key}.npy')
    locks = RangeLocks.for_path(os.path.join(directory, 'plans.lock'))
    plan = _load(path)
    if plan is not None:
        planner.warn(stacklevel=2)  # what a computed plan warns, a cached one warns too
        _hold(locks, key)
        return plan
    byte = int(key[:8], 16) % _LOCK_BYTES
    # Plans take milliseconds to seconds and every worker of the node waits for the one computing it: look often.
    locks.acquire(byte, True, PLAN_LOCK_TIMEOUT, 'another process computing this epoch plan', max_delay=0.004)
    try:
        plan = _load(path)
        if plan is None:
            plan = np.ascontiguousarray(planner.plan_node(world, epoch, sample_in_epoch, node), dtype=np.int64)
            tmp = temp_name(path)
            try:
                _save(plan, tmp, path)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
            _hold(locks, key)
            prune_plans(directory, keep=path)
        else:
            planner.warn(stacklevel=2)
            _hold(locks, key)
    finally:
        locks.release(byte)
    return plan


def _use_byte(key: str) -> int:
    return _LOCK_BYTES + zlib.crc32(key.encode('utf-8')) % _LOCK_BYTES


def _hold(locks: RangeLocks, key: str) -> None:
    """Mark the plan ``key`` as in use by this process (and release the marks beyond the last few plans)."""
    global _held, _held_pid
    byte = _use_byte(key)
    with _held_mutex:
        if _held_pid != os.getpid():  # a forked child holds none of its parent's locks
            _held, _held_pid = OrderedDict(), os.getpid()
        item = (locks.path, byte)
        if item in _held:
            _held.move_to_end(item)
            return
        try:
            locks.acquire(byte, False, _HOLD_TIMEOUT, 'a plan being pruned')
        except WaitTimeoutError:
            return
        _held[item] = locks
        while len(_held) > PLANS_HELD_PER_PROCESS:
            (_, old), old_locks = _held.popitem(last=False)
            old_locks.release(old)


def prune_plans(directory: str, keep: str | None = None) -> int:
    """Remove the plan files of ``directory`` beyond the bounds (count, total bytes, age), never one a live process
    holds, nor ``keep``. Returns the number removed."""
    entries = []
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in scan:
        if not entry.name.endswith('.npy'):
            continue
        try:
            info = entry.stat()
        except OSError:
            continue
        entries.append((info.st_mtime, info.st_size, entry.path, entry.name[:-len('.npy')]))
    entries.sort(reverse=True)  # most recently used first
    cutoff = time.time() - MAX_PLAN_AGE
    locks = RangeLocks.for_path(os.path.join(directory, 'plans.lock'))
    kept = kept_bytes = removed = 0
    for mtime, size, path, key in entries:
        within = kept < MAX_PLANS and mtime >= cutoff and (kept_bytes + size <= MAX_PLAN_BYTES or not kept)
        if path == keep or within or not _remove_unless_held(locks, path, key):
            kept += 1
            kept_bytes += size
        else:
            removed += 1
    if removed:
        logger.debug('pruned %d epoch plan file(s) from %s', removed, directory)
    return removed


def _remove_unless_held(locks: RangeLocks, path: str, key: str) -> bool:
    byte = _use_byte(key)
    if not locks.try_acquire(byte, True):
        return False  # a live process (maybe this one) holds it
    try:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        try:
            os.remove(record_path(path))  # its checksum's verification record, if any
        except OSError:
            pass
        return True
    except OSError:
        return False
    finally:
        locks.release(byte)


def _key_mix(path: str) -> int:
    """What a plan's stored checksum is combined with: a digest of its key (its file name), so that a plan copied or
    renamed under another key fails its checksum like a corrupt one, never served as that key's plan."""
    key = os.path.basename(path)
    return int.from_bytes(hashlib.blake2b(key.encode('utf-8'), digest_size=8).digest(), 'little')


def _save(plan: NDArray[np.int64], tmp: str, path: str) -> None:
    """Write ``plan`` as ``.npy`` followed by the checksum of those bytes combined with :func:`_key_mix` of ``path``
    (8 bytes, little-endian)."""
    with open(tmp, 'w+b') as handle:
        np.save(handle, plan)
        length = handle.tell()
        handle.write(struct.pack('<Q', xxh3_checksum(handle, length) ^ _key_mix(path)))


def _load(path: str) -> NDArray[np.int64] | None:
    """The plan at ``path``, memory-mapped; None when it is absent, truncated, corrupt or of another key (it is then
    computed again). Its checksum is verified once per file version and node."""
    try:
        with open(path, 'rb') as handle:
            stat = os.fstat(handle.fileno())
            if stat.st_size < 8 + 10:
                return None
            handle.seek(stat.st_size - 8)
            (stored,) = struct.unpack('<Q', handle.read(8))
            stored ^= _key_mix(path)
            # Plans are only ever replaced by a rename (a new inode); their times mark use (see prune_plans).
            if not checksum_vouched(handle, path, stat, stat.st_size - 8, stored, times=False):
                if path not in _corrupt_seen:  # looked up twice per computation: said once
                    _corrupt_seen.add(path)
                    logger.warning('Epoch plan %s is corrupt, or another key\'s plan copied there (checksum '
                                   'mismatch): computing it again.', path)
                return None
        try:
            plan = np.load(path, mmap_mode='r')
        except ValueError:  # an empty array cannot be memory-mapped
            plan = np.load(path)
    except (FileNotFoundError, ValueError, OSError, EOFError):
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return plan
