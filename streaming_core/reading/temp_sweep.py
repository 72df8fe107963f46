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
    return _sweep(directory)[0]


def _sweep(directory: str) -> tuple[int, bool]:
    """:func:`remove_dead_temp_files`, also saying whether a temporary file was left for a writer that may still
    run (its death later need not change the directory, so the sweep must not be taken as final)."""
    removed, pending = 0, False
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
                    pending = True
                    continue
            else:
                try:
                    if now - os.path.getmtime(path) < FOREIGN_TEMP_AGE:
                        pending = True
                        continue
                except OSError:
                    continue
            try:
                os.remove(path)
                removed += 1
            except OSError:
                pass
    return removed, pending


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_SWEEP_MARKER = 'temp-sweep'
_SWEEP_EVERY_NS = 3600 * 10**9
#: How long after the directory's last change a marker must be written to be trusted (coarse filesystem clocks).
_SETTLE_NS = 2 * 10**9


def sweep_local_dir(local_dir: str) -> None:
    """:func:`remove_dead_temp_files` over a stream's local directory (a walk over every shard file), only when it
    changed since the last complete sweep of any process or an hour passed, so a warm start at 10^6 shards does not
    list them.

    The marker in the state directory records the directory's modification time read before the walk. A sweep that
    left a live writer's file records nothing to match (the writer may die without touching the directory again),
    and a marker written within :data:`_SETTLE_NS` of that modification time is not trusted: a file created in the
    same clock tick as the sweep's stat leaves the time unchanged (the "racy timestamp" of version control tools).
    """
    sdir = state_dir(local_dir)
    marker = os.path.join(sdir, _SWEEP_MARKER)
    try:
        mtime = os.stat(local_dir).st_mtime_ns
    except OSError:
        return
    try:
        with open(marker, 'rb') as handle:
            last = handle.read().decode('ascii', 'replace')  # damaged: not the mtime, so swept and rewritten
        written = os.stat(marker).st_mtime_ns
        fresh = time.time_ns() - written < _SWEEP_EVERY_NS and written - mtime > _SETTLE_NS
    except OSError:
        last, fresh = '', False
    if last == str(mtime) and fresh:
        return
    _, pending = _sweep(local_dir)
    try:
        tmp = temp_name(marker)
        with open(tmp, 'w') as handle:
            handle.write('pending' if pending else str(mtime))
        os.replace(tmp, marker)
    except OSError:  # a read-only cache root: sweep again next time
        pass
