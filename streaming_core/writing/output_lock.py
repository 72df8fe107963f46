"""One writer at a time per output on a node: two writers of one directory (or one remote prefix) would write shards
of the same names over each other and each commit an index naming the other's files, both reporting success.

A writer holds a kernel-released record lock (``fcntl.lockf``) on a small file under the cache root
(``state/writers/``) for its local directory and, with a remote, one for the remote, both by their comparison keys
(:func:`~streaming_core.reading.cache_record.path_key` for the local directory, as the writer names it;
:func:`~streaming_core.reading.cache_record.remote_key` for the remote, whose key for a local path or ``file://`` URL
is the ``path_key`` of that path: a directory named as a local output and as such a remote is one output),
from construction to ``finish``; a second process that opens a writer of one of them is refused, naming the process
that holds it. A crash releases the lock. Record locks belong to a process, so writers of one process share it (it
is counted, and dropped with the last); they, and writers on different machines of one remote, are not told apart.
Where the cache root cannot be written, writers go unlocked (logged).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import threading

from streaming_core.common.paths import state_root
from streaming_core.errors import OutputBusyError

__all__ = ['OutputBusyError', 'OutputLock']

logger = logging.getLogger('streaming_core.writing.output_lock')
_held: dict[str, list[int]] = {}  # lock file -> [descriptor, writers of this process holding it]
_guard = threading.RLock()  # reentrant: a dropped writer's __del__ may release while this thread takes a lock


def _after_fork() -> None:
    global _guard
    _held.clear()  # a child holds no record lock (the descriptors stay open for the parent's sake)
    _guard = threading.RLock()


os.register_at_fork(after_in_child=_after_fork)


class OutputLock:
    """The locks of one writer's output, taken at construction (see the module docstring).

    Args:
        keys: What names the output (the comparison keys of its local directory and of its remote).
        shown: The output as messages show it.

    Raises:
        OutputBusyError: another live process holds one of them, naming that process.
    """

    def __init__(self, keys: list[str], shown: str) -> None:
        self._paths: list[str] = []
        try:
            for key in keys:
                self._take(key, shown)
        except BaseException:
            self.release()
            raise

    def _take(self, key: str, shown: str) -> None:
        folder = os.path.join(state_root(), 'writers')
        path = os.path.join(folder, hashlib.blake2s(key.encode('utf-8'), digest_size=16).hexdigest() + '.lock')
        with _guard:
            if path in _held:
                _held[path][1] += 1
                self._paths.append(path)
                return
            try:
                os.makedirs(folder, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as err:
                logger.warning('cannot lock the output %s against other writers (%s: %s); writing unlocked',
                               shown, type(err).__name__, err)
                return
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = os.pread(fd, 32, 0).decode('ascii', 'replace').strip() or 'another process'
                os.close(fd)
                if err.errno in (errno.EACCES, errno.EAGAIN):
                    raise OutputBusyError(f'Another writer is writing to {shown} (process {holder}): two writers of '
                                          f'one output would overwrite each other\'s shards. Wait for it to finish, '
                                          f'or write to another location.') from None
                raise
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode('ascii'), 0)
            _held[path] = [fd, 1]
            self._paths.append(path)

    def release(self) -> None:
        """Let other writers of the output start once no writer of this process holds it (idempotent)."""
        paths, self._paths = self._paths, []
        with _guard:
            for path in paths:
                held = _held.get(path)
                if held is None:
                    continue
                held[1] -= 1
                if held[1] == 0:
                    del _held[path]
                    os.close(held[0])  # closing releases this process's record lock on the file
