"""State shared between a rank process and its DataLoader workers, with nothing named and nothing to go stale.

The memory is an anonymous file (``memfd``) mapped shared. DataLoader workers inherit it when forked and receive
its file descriptor when spawned (pickling during process start passes the descriptor). It disappears with the
last process that maps it, so a crash leaves nothing behind in ``/dev/shm``.

Layout (little-endian int64 words): ``[generation, blob length, epochs started per worker slot...]`` followed by a
JSON blob holding the last ``load_state_dict`` state.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ['SharedState', 'MAX_SLOTS', 'BLOB_BYTES']

MAX_SLOTS = 1024
BLOB_BYTES = 1 << 16
_WORDS = 2 + MAX_SLOTS
_SIZE = 8 * _WORDS + BLOB_BYTES


def _anonymous_fd(size: int) -> int:
    if hasattr(os, 'memfd_create'):
        fd = os.memfd_create('streaming-core-state', 0)
    else:  # pragma: no cover - non-Linux
        fd, name = tempfile.mkstemp(prefix='streaming-core-state-')
        os.unlink(name)
    os.ftruncate(fd, size)
    return fd


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _rebuild(dup: Any) -> 'SharedState':
    return SharedState(fd=dup.detach())


class SharedState:
    """Epoch counters and the resume state of one dataset object and its workers."""

    def __init__(self, fd: int | None = None) -> None:
        self._fd = _anonymous_fd(_SIZE) if fd is None else fd
        weakref.finalize(self, _close, self._fd)  # the mapping keeps its own handle; ours goes with this object
        self._mmap = mmap.mmap(self._fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._words = np.frombuffer(self._mmap, dtype=np.int64, count=_WORDS)
        self._lock = threading.Lock()

    def __reduce__(self) -> Any:
        from multiprocessing import context, reduction
        if context.get_spawning_popen() is None:
            return (SharedState, ())  # plain pickling (not a worker start): a private copy
        return (_rebuild, (reduction.DupFd(self._fd),))

    def epochs_started(self, slot: int) -> int:
        """How many epochs worker slot ``slot`` of this rank has started."""
        self._check_slot(slot)
        return int(self._words[2 + slot])

    def set_epochs_started(self, slot: int, value: int) -> None:
        """Record that worker slot ``slot`` has started ``value`` epochs."""
        self._check_slot(slot)
        self._words[2 + slot] = value

    def max_epochs_started(self) -> int:
        """The most epochs started by any worker slot of this rank."""
        return int(self._words[2:].max())

    @staticmethod
    def _check_slot(slot: int) -> None:
        if not 0 <= slot < MAX_SLOTS:
            raise ValueError(f'At most {MAX_SLOTS} DataLoader workers per rank are supported, got worker {slot}.')

    def write_resume(self, state: dict[str, Any]) -> None:
        """Store a resume state for the workers to pick up at their next epoch."""
        blob = json.dumps(state, sort_keys=True).encode('utf-8')
        if len(blob) > BLOB_BYTES:
            raise ValueError(f'The state dict is too large to share with workers: {len(blob)} bytes, at most '
                             f'{BLOB_BYTES}.')
        with self._lock:
            offset = 8 * _WORDS
            self._mmap[offset:offset + len(blob)] = blob
            self._words[1] = len(blob)
            self._words[0] += 1

    def read_resume(self) -> dict[str, Any] | None:
        """The stored resume state, or None."""
        length = int(self._words[1])
        if length <= 0:
            return None
        offset = 8 * _WORDS
        return json.loads(bytes(self._mmap[offset:offset + length]).decode('utf-8'))

    def reset(self) -> None:
        """Forget every counter and the resume state."""
        self._words[:] = 0
