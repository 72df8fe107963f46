"""Epoch plans computed once per node and shared through memory-mapped files.

The first process of a node that needs an epoch's plan computes its node's share (``planner.plan_node``) under
a kernel-released lock and writes it atomically to ``<cache root>/plans/<key>.npy``; every other rank and worker
of the node maps that file. The key covers everything the plan depends on, so a file is never stale; old files
are removed after a while. There is no barrier: a process that finds the file simply uses it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.locking import RangeLocks
from streaming_core.paths import coordination_dir
from streaming_core.storage import temp_name

__all__ = ['plan_key', 'node_plan', 'PLAN_LOCK_TIMEOUT', 'MAX_PLAN_AGE']

logger = logging.getLogger('streaming_core.plans')

#: How long a process waits for another process of its node to compute a plan.
PLAN_LOCK_TIMEOUT = 1800.0
#: Plan files older than this (seconds) are removed when a new plan is written.
MAX_PLAN_AGE = 6 * 3600
_LOCK_BYTES = 1 << 20


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
    digest.update(f'epoch={epoch};start={sample_in_epoch};node={node}'.encode())
    return digest.hexdigest()


def node_plan(planner: Any, world: Any, epoch: int, sample_in_epoch: int, node: int,
              share: bool = True) -> NDArray[np.int64]:
    """This node's plan ``(ranks_per_node, workers_per_rank, batches, batch_size)``, computed once per node."""
    if not share:
        return planner.plan_node(world, epoch, sample_in_epoch, node)
    try:
        directory = coordination_dir('plans')
    except OSError as err:
        logger.warning('Cannot share epoch plans (%s); computing in this process.', err)
        return planner.plan_node(world, epoch, sample_in_epoch, node)
    key = plan_key(planner, world, epoch, sample_in_epoch, node)
    path = os.path.join(directory, f'{key}.npy')
    plan = _load(path)
    if plan is not None:
        return plan
    locks = RangeLocks.for_path(os.path.join(directory, 'plans.lock'))
    byte = int(key[:8], 16) % _LOCK_BYTES
    locks.acquire(byte, True, PLAN_LOCK_TIMEOUT, 'another process computing this epoch plan')
    try:
        plan = _load(path)
        if plan is None:
            plan = np.ascontiguousarray(planner.plan_node(world, epoch, sample_in_epoch, node), dtype=np.int64)
            tmp = temp_name(path)
            try:
                with open(tmp, 'wb') as handle:
                    np.save(handle, plan)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
            _remove_old(directory)
    finally:
        locks.release(byte)
    return plan


def _load(path: str) -> NDArray[np.int64] | None:
    try:
        try:
            plan = np.load(path, mmap_mode='r')
        except ValueError:  # an empty array cannot be memory-mapped
            plan = np.load(path)
    except (FileNotFoundError, ValueError, OSError):
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return plan


def _remove_old(directory: str) -> None:
    cutoff = time.time() - MAX_PLAN_AGE
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.endswith('.npy'):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.getmtime(path) < cutoff:
                os.remove(path)
        except OSError:
            pass
