"""Epoch counters and the resume state of one rank's dataset object, shared with its DataLoader workers only.

The memory is an anonymous file (``memfd``) mapped shared: nothing is named, so nothing can go stale in
``/dev/shm``. DataLoader workers inherit it when forked and receive its file descriptor when spawned. Nothing else
shares it: a process that is not a DataLoader worker and finds itself holding another process's state (a training
rank started by ``fork`` or ``spawn`` with the dataset in its arguments, as Lightning's ``ddp_spawn`` and
``ddp_fork`` do) takes a private copy on first use, and before it forks anything. Plain pickling (``copy.deepcopy``,
saving the object) also gives a private copy of the contents.

Layout (little-endian int64 words): ``[generation, blob length, current epoch, its start offset, next epoch per
worker slot..., resume generation consumed per worker slot..., per-worker resume status per worker slot...]``
followed by a JSON blob holding the last ``load_state_dict`` state.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import tempfile
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ['SharedState', 'MAX_SLOTS', 'MAIN_SLOT', 'BLOB_BYTES', 'slot_of']

MAX_SLOTS = 1024
#: The slot of the rank's own process when it iterates without DataLoader workers (workers use 0..MAX_SLOTS-2).
MAIN_SLOT = MAX_SLOTS - 1
BLOB_BYTES = 1 << 16
_GEN, _BLOB, _CUR_EPOCH, _CUR_OFFSET, _HEADER = 0, 1, 2, 3, 4
_NEXT = _HEADER
_CONSUMED = _HEADER + MAX_SLOTS
_RESUMED = _HEADER + 2 * MAX_SLOTS
_WORDS = _HEADER + 3 * MAX_SLOTS
_SIZE = 8 * _WORDS + BLOB_BYTES

_live: 'weakref.WeakSet[SharedState]' = weakref.WeakSet()


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


def _in_dataloader_worker() -> bool:
    data = sys.modules.get('torch.utils.data')
    return data is not None and data.get_worker_info() is not None


def slot_of(worker: int) -> int:
    """The counter slot of DataLoader worker ``worker``, or :data:`MAIN_SLOT` outside a worker."""
    return worker if _in_dataloader_worker() else MAIN_SLOT


def _rebuild(dup: Any) -> 'SharedState':
    return SharedState(fd=dup.detach(), owner=None)


def _from_bytes(content: bytes) -> 'SharedState':
    state = SharedState()
    state._mmap[:len(content)] = content  # the rest of the fresh mapping is zeros already
    return state


def _privatize_inherited() -> None:
    """Before this process forks: states it inherited from another process become its own (see the module doc)."""
    for state in list(_live):
        state._own()


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(before=_privatize_inherited)


class SharedState:
    """Epoch counters and the resume state of one dataset object and its DataLoader workers."""

    def __init__(self, fd: int | None = None, owner: int | None = -1) -> None:
        self._map(_anonymous_fd(_SIZE) if fd is None else fd)
        self._owner: int | None = os.getpid() if owner == -1 else owner
        self._lock = threading.Lock()
        _live.add(self)

    def _map(self, fd: int) -> None:
        self._fd = fd
        self._finalizer = weakref.finalize(self, _close, fd)  # the mapping keeps its own handle
        self._mmap = mmap.mmap(fd, _SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._words = np.frombuffer(self._mmap, dtype=np.int64, count=_WORDS)

    def _own(self) -> None:
        """Share with the rank (in a DataLoader worker), or take a private copy (anywhere else)."""
        pid = os.getpid()
        if self._owner == pid:
            return
        if not _in_dataloader_worker():
            content = bytes(self._mmap)
            old_finalizer = self._finalizer
            self._map(_anonymous_fd(_SIZE))
            self._mmap[:] = content
            old_finalizer()
        self._owner = pid

    def __reduce__(self) -> Any:
        from multiprocessing import context, reduction
        self._own()
        if context.get_spawning_popen() is None:
            return (_from_bytes, (bytes(self._mmap).rstrip(b'\0'),))  # plain pickling: a private copy
        return (_rebuild, (reduction.DupFd(self._fd),))

    @property
    def words(self) -> np.ndarray:
        """The counters, owned by this process (see the module doc)."""
        if self._owner != os.getpid():
            self._own()
        return self._words

    # ----------------------------------------------------------------------------------------------------------
    def next_epoch(self, slot: int) -> int:
        """The epoch slot ``slot`` of this rank starts next (before any resume state).

        A worker starts after its own last epoch, or after the rank's own iterations without workers if later (a
        loader after a direct pass); the rank's own iteration starts after every slot's last epoch (it never runs
        while workers do). Workers of one loader thus agree whatever their start order.
        """
        self._check_slot(slot)
        words = self.words
        if slot == MAIN_SLOT:
            return int(words[_NEXT:_NEXT + MAX_SLOTS].max())
        return max(int(words[_NEXT + slot]), int(words[_NEXT + MAIN_SLOT]))

    def max_next_epoch(self) -> int:
        """The furthest next epoch of any worker slot of this rank."""
        return int(self.words[_NEXT:_NEXT + MAX_SLOTS].max())

    def begin_epoch(self, slot: int, epoch: int, offset: int) -> None:
        """Worker slot ``slot`` starts ``epoch`` at global sample ``offset``."""
        self._check_slot(slot)
        words = self.words
        words[_NEXT + slot] = epoch + 1
        words[_CUR_EPOCH] = epoch + 1  # stored +1 so that 0 means "none since the last set_epoch or load"
        words[_CUR_OFFSET] = offset

    def set_next_of(self, slot: int, epoch: int) -> None:
        """Slot ``slot`` starts ``epoch`` next (nothing else changes)."""
        self._check_slot(slot)
        self.words[_NEXT + slot] = epoch

    def current(self) -> tuple[int, int] | None:
        """``(epoch, start offset)`` of the epoch this rank iterates, or None if none began since the last
        :meth:`set_next_epoch` or :meth:`write_resume`."""
        words = self.words
        value = int(words[_CUR_EPOCH])
        return None if value == 0 else (value - 1, int(words[_CUR_OFFSET]))

    def set_next_epoch(self, epoch: int) -> None:
        """Every worker slot starts ``epoch`` next."""
        words = self.words
        words[_NEXT:_NEXT + MAX_SLOTS] = epoch
        words[_CUR_EPOCH] = 0

    @staticmethod
    def _check_slot(slot: int) -> None:
        if not 0 <= slot < MAX_SLOTS:
            raise ValueError(f'At most {MAX_SLOTS - 1} DataLoader workers per rank are supported, got worker {slot}.')

    # ----------------------------------------------------------------------------------------------------------
    def write_resume(self, state: dict[str, Any]) -> None:
        """Store a resume state for every worker slot to pick up once, at its next epoch."""
        blob = json.dumps(state, sort_keys=True).encode('utf-8')
        if len(blob) > BLOB_BYTES:
            raise ValueError(f'The state dict is too large to share with workers: {len(blob)} bytes, at most '
                             f'{BLOB_BYTES}.')
        words = self.words
        with self._lock:
            offset = 8 * _WORDS
            self._mmap[offset:offset + len(blob)] = blob
            words[_BLOB] = len(blob)
            words[_GEN] += 1
            words[_CUR_EPOCH] = 0

    def read_resume(self) -> dict[str, Any] | None:
        """The stored resume state (consumed or not), or None."""
        length = int(self.words[_BLOB])
        if length <= 0:
            return None
        offset = 8 * _WORDS
        return json.loads(bytes(self._mmap[offset:offset + length]).decode('utf-8'))

    def pending_resume(self, slot: int) -> dict[str, Any] | None:
        """The resume state if slot ``slot`` has not consumed it yet, else None."""
        words = self.words
        if words[_BLOB] <= 0:
            return None
        if words[_CONSUMED + slot] >= words[_GEN]:
            return None
        return self.read_resume()

    def resume_started(self) -> bool:
        """Whether any slot (a DataLoader worker, or the rank's own process) has started from the resume state."""
        words = self.words
        return bool(words[_BLOB] > 0 and (words[_CONSUMED:_CONSUMED + MAX_SLOTS] >= words[_GEN]).any())

    def consume_resume(self, slot: int) -> None:
        """Worker slot ``slot`` has started from the resume state."""
        self._check_slot(slot)
        words = self.words
        words[_CONSUMED + slot] = words[_GEN]

    def publish_resumed(self, slot: int, tag: int, finished: bool) -> None:
        """Worker slot ``slot`` resumes from a per-worker position (torchdata's) tagged ``tag`` (its epoch and start
        offset, the same for every worker of one saved state), and whether it had read its whole share."""
        self._check_slot(slot)
        self.words[_RESUMED + slot] = 2 * tag + (0 if finished else 1)

    def resumed_statuses(self, slots: int, tag: int) -> list[bool | None]:
        """For worker slots ``0..slots-1``: whether each resumed from a position tagged ``tag`` with its share left
        (True), with its share read (False), or has not said so yet (None)."""
        words = self.words
        return [None if int(words[_RESUMED + slot]) // 2 != tag else bool(int(words[_RESUMED + slot]) % 2)
                for slot in range(slots)]

    def clear_resumed(self, slot: int) -> None:
        """Worker slot ``slot`` starts an epoch from its counters (no per-worker position)."""
        self._check_slot(slot)
        self.words[_RESUMED + slot] = 0

    def clear_resume(self) -> None:
        """Forget the resume state."""
        self.words[_BLOB] = 0

    def reset(self) -> None:
        """Forget every counter and the resume state."""
        self.words[:] = 0
