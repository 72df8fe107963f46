"""Temporary files left by processes that died mid-write: which are dead, and when a local directory is swept.

Every temporary name is :func:`~streaming_core.storage.facade.temp_name`'s ``<path>.<pid>-<host token>.<random>.tmp``,
so a sweep can ask whether the writer still runs when it is of this host and PID namespace, and otherwise judges
the file by its age.
"""

from __future__ import annotations

import json
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


def _sweep(directory: str) -> tuple[int, bool, dict[str, int]]:
    """:func:`remove_dead_temp_files`, also saying whether a temporary file was left for a writer of this host that
    still runs (its death later need not change any directory, so the sweep must not be taken as final), and the
    modification time of each directory walked (relative name: ``mtime_ns``), read before it was listed."""
    removed, pending = 0, False
    stamps: dict[str, int] = {}
    mine = host_token()
    now = time.time()
    stack = ['']
    while stack:
        relative = stack.pop()
        path = os.path.join(directory, relative) if relative else directory
        try:
            stamps[relative] = os.stat(path).st_mtime_ns
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if not name.endswith('.tmp'):  # most names: no regular expression run
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(os.path.join(relative, name) if relative else name)
                except OSError:
                    pass
                continue
            match = _TEMP.match(name)
            if match is None:
                continue
            if match.group(2) == mine:
                if _alive(int(match.group(1))):
                    pending = True
                    continue
            else:
                try:  # judged by its age: the hourly sweep sees it once it is old enough
                    if now - os.path.getmtime(entry.path) < FOREIGN_TEMP_AGE:
                        continue
                except OSError:
                    continue
            try:
                os.remove(entry.path)
                removed += 1
            except OSError:
                pass
    return removed, pending, stamps


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
#: How long after a directory's last change a marker must be written to be trusted (coarse filesystem clocks).
_SETTLE_NS = 2 * 10**9


def sweep_local_dir(local_dir: str) -> None:
    """:func:`remove_dead_temp_files` over a stream's local directory (a walk over every shard file), only when one
    of its directories changed since the last complete sweep of any process, or an hour passed, so a warm start at
    10^6 shards does not list them.

    The marker in the state directory records the modification time of each directory the sweep walked (a
    subdirectory's own: a download into ``part-0/`` does not touch its parent), read before it was listed. A sweep
    that left a live writer's file records nothing to match (the writer may die without touching a directory
    again), and a marker written within :data:`_SETTLE_NS` of a directory's modification time is not trusted: a file
    created in the same clock tick as the sweep's stat leaves the time unchanged (the "racy timestamp" of version
    control tools).
    """
    marker = os.path.join(state_dir(local_dir), _SWEEP_MARKER)
    if _swept(local_dir, marker):
        return
    _, pending, stamps = _sweep(local_dir)
    try:
        tmp = temp_name(marker)
        with open(tmp, 'w') as handle:
            handle.write('pending' if pending else json.dumps(stamps, sort_keys=True))
        os.replace(tmp, marker)
    except OSError:  # a read-only cache root: sweep again next time
        pass


def _swept(local_dir: str, marker: str) -> bool:
    """Whether the marker shows a complete sweep, within the hour, of the directories as they are now."""
    try:
        with open(marker, 'rb') as handle:
            stamps = json.loads(handle.read())
        written = os.stat(marker).st_mtime_ns
    except (OSError, ValueError):  # none, 'pending', damaged, or an earlier version's
        return False
    if not isinstance(stamps, dict) or '' not in stamps or time.time_ns() - written >= _SWEEP_EVERY_NS:
        return False
    for relative, recorded in stamps.items():
        try:
            now = os.stat(os.path.join(local_dir, relative) if relative else local_dir).st_mtime_ns
        except (OSError, TypeError, ValueError):
            return False
        if now != recorded or written - now <= _SETTLE_NS:
            return False
    return True
