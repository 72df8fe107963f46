"""One writer at a time per output on a node: two writers of one directory (or one remote prefix) would write shards
of the same names over each other and each commit an index naming the other's files, both reporting success.

A writer holds a kernel-released record lock (``fcntl.lockf``) on a small file under the cache root
(``state/writers/``), named by its output (the local directory's real path, or the remote's comparison key when
there is one), from construction to ``finish``; a second process that opens a writer of that output is refused,
naming the process that holds it. A crash releases the lock. Writers of one process are not told apart (record
locks are per process), nor are writers on different machines of one remote prefix.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os

from streaming_core.common.paths import state_root
from streaming_core.errors import OutputBusyError

__all__ = ['OutputBusyError', 'OutputLock']


class OutputLock:
    """The lock of one output, taken at construction (see the module docstring).

    Args:
        key: What names the output (a real local path, or a remote's comparison key).
        shown: The output as messages show it.

    Raises:
        OutputBusyError: another live process holds it, naming that process.
    """

    def __init__(self, key: str, shown: str) -> None:
        folder = os.path.join(state_root(), 'writers')
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, hashlib.blake2s(key.encode('utf-8'), digest_size=16).hexdigest() + '.lock')
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = os.pread(self._fd, 32, 0).decode('ascii', 'replace').strip() or 'another process'
            os.close(self._fd)
            self._fd = None
            if err.errno in (errno.EACCES, errno.EAGAIN):
                raise OutputBusyError(f'Another writer is writing to {shown} (process {holder}): two writers of one '
                                      f'output would overwrite each other\'s shards. Wait for it to finish, or write '
                                      f'to another location.') from None
            raise
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode('ascii'), 0)

    def release(self) -> None:
        """Let other writers of the output start (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing releases this process's record locks on the file
