"""Temporary files left by processes that died mid-write: which are dead, and when a local directory is swept.

Every temporary name is :func:`~streaming_core.storage.facade.temp_name`'s ``<path>.<pid>-<host token>.<random>.tmp``,
so a sweep can ask whether the writer still runs when it is of this host and PID namespace, and otherwise judges
the file by its age.
"""

from __future__ import annotations

import os
import re
import time

from streaming_core.common.paths import state_dir
from streaming_core.storage.facade import host_token, temp_name

__all__ = ['FOREIGN_TEMP_AGE', 'remove_dead_temp_files', 'sweep_local_dir']

_TEMP = re.compile(r'.+\.(\d+)(?:-([0-9a-f]{8}))?\.[0-9a-f]{8}\.tmp$')
#: A temporary file of another host or PID namespace (or of an earlier version, without a host token) is removed
#: only when untouched this long: its writer cannot be asked whether it still runs.
FOREIGN_TEMP_AGE = 24 * 3600.0


def remove_dead_temp_files(directory: str) -> int:
    """Remove the temporary files (:func:`~streaming_core.storage.facade.temp_name`) left by processes of this
    host and PID namespace that no longer run, and those of other hosts or namespaces untouched for
    :data:`FOREIGN_TEMP_AGE` (another container on the same disk, another node on a shared filesystem: its process
    ids are not ours to test)."""
    removed = 0
    mine = host_token()
    now = time.time()
    for dirpath, _, filenames in os.walk(directory):
        for name in filenames:
            if not name.endswith('.tmp'):  # most names: no regular expression run
                continue
            match = _TEMP.match(name)
            if match is None:
                continue
            path = os.path.join(dirpath, name)
            if match.group(2) == mine:
                if _alive(int(match.group(1))):
                    continue
            else:
                try:
                    if now - os.path.getmtime(path) < FOREIGN_TEMP_AGE:
                        continue
                except OSError:
                    continue
            try:
                os.remove(path)
                removed += 1
            except OSError:
                pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_SWEEP_MARKER = 'temp-sweep'
_SWEEP_EVERY = 3600.0


def sweep_local_dir(local_dir: str) -> None:
    """:func:`remove_dead_temp_files` over a stream's local directory (a walk over every shard file), only when it
    changed since the last sweep of any process (its modification time, as recorded in the state directory) or an
    hour passed, so a warm start at 10^6 shards does not list them."""
    sdir = state_dir(local_dir)
    marker = os.path.join(sdir, _SWEEP_MARKER)
    try:
        mtime = str(os.stat(local_dir).st_mtime_ns)
    except OSError:
        return
    try:
        with open(marker, 'rb') as handle:
            last = handle.read().decode('ascii', 'replace')  # damaged: not the mtime, so swept and rewritten
        fresh = time.time() - os.path.getmtime(marker) < _SWEEP_EVERY
    except OSError:
        last, fresh = '', False
    if last == mtime and fresh:
        return
    remove_dead_temp_files(local_dir)
    try:
        tmp = temp_name(marker)
        with open(tmp, 'w') as handle:
            handle.write(str(os.stat(local_dir).st_mtime_ns))
        os.replace(tmp, marker)
    except OSError:  # a read-only cache root: sweep again next time
        pass
