"""Which local files a new version of an index may not share with the cached version (their content may differ).

Used when a stream's index changes (:mod:`streaming_core.reading.index_sync`) and when a derived index is rebuilt
(:mod:`streaming_core.reading.derived_index`): a file is kept only when both versions prove it identical.
"""

from __future__ import annotations

import os
from typing import Any

from streaming_core.reading.index_file import present_copy

__all__ = ['stale_files', 'compare_versions']


def _file_map(index: dict[str, Any]) -> dict[str, tuple[int, dict[str, str]] | None]:
    """``basename -> (bytes, hashes)`` of every file object in the index's shard entries (``None`` when one name is
    described twice, differently)."""
    files: dict[str, tuple[int, dict[str, str]] | None] = {}

    def visit(value: Any, depth: int) -> None:
        if isinstance(value, dict):
            name = value.get('basename')
            if isinstance(name, str):
                hashes = value.get('hashes')
                info = (value.get('bytes'), dict(hashes) if isinstance(hashes, dict) else {})
                files[name] = info if files.get(name, info) == info else None
                return
            if depth < 3:
                for item in value.values():
                    visit(item, depth + 1)
        elif isinstance(value, list) and depth < 3:
            for item in value:
                visit(item, depth + 1)

    for entry in index.get('shards', []):
        visit(entry, 0)
    return files


def _proven_same(old: tuple[int, dict[str, str]] | None, new: tuple[int, dict[str, str]] | None) -> bool:
    """Whether the two index entries prove one file's content identical: same size and the same digest for every
    hash algorithm both record (at least one)."""
    if old is None or new is None or old[0] != new[0]:
        return False
    common = set(old[1]) & set(new[1])
    return bool(common) and all(old[1][name] == new[1][name] for name in common)


def stale_files(old: dict[str, Any] | None, new: dict[str, Any], local_dir: str, verify: bool = False) -> list[str]:
    """The local files of ``local_dir`` that the index version ``new`` may not share with the cached version ``old``
    (the first part of :func:`compare_versions`)."""
    return compare_versions(old, new, local_dir, verify)[0]


#: At most this many bytes of a directory of unknown provenance are hashed when it is adopted (see :func:`_unproven`).
VERIFY_BYTES = 2 << 30


def _content_matches(path: str, size: Any, hashes: dict[str, str]) -> bool:
    """Whether the local file at ``path`` has ``size`` bytes and the digest ``hashes`` records, by one of its
    algorithms that is installed (the fastest kind first); False when none is, or the file cannot be read."""
    from streaming_core.storage.hashing import HASH_PREFERENCE, hash_file, is_hash
    rank = {name: i for i, name in enumerate(HASH_PREFERENCE)}
    try:
        if os.path.getsize(path) != size:
            return False
        for name in sorted(hashes, key=lambda n: (rank.get(n, len(rank)), n)):
            if is_hash(name):
                return hash_file(name, path) == hashes[name]
    except (OSError, ValueError):
        return False
    return False


def compare_versions(old: dict[str, Any] | None, new: dict[str, Any], local_dir: str,
                     verify: bool = False) -> tuple[list[str], bool]:
    """``(stale, changed)`` for a cached index version ``old`` and a new one ``new``, from one reading of each.

    ``stale``: the local files of ``local_dir`` that ``new`` may not share with ``old``. A file named by either
    index is kept only when both record the same size and the same hash for it; with the old version unknown (no
    parsable local index), every file the new index names is stale. Names that would leave the directory are skipped
    (the index is refused later, when its shards are read).

    ``changed``: whether ``new`` fails to prove some file of ``old`` identical (removed, or not recorded with the
    same size and hash), present locally or not: a job still reading ``old`` must not install its copy of such a
    file where readers of ``new`` would take it for theirs. False when ``old`` is unknown.

    ``verify``: the local files' provenance is unknown (``old`` says nothing about them: a directory without our
    record, or an ``index.json`` copied in by hand), so the files the two indexes prove the same are kept only when
    their own bytes have the recorded size and hash (see :func:`_unproven`).
    """
    new_files = _file_map(new)
    old_files = _file_map(old) if old is not None else {}
    stale, kept = [], []
    real_root = os.path.realpath(local_dir)
    for name in sorted(set(new_files) | set(old_files)):
        path = present_copy(local_dir, name, 'index', real_root)
        if path is None:
            continue
        if old is None or not _proven_same(old_files.get(name), new_files.get(name)):
            stale.append(path)
        else:
            kept.append((path, new_files[name]))
    if verify:
        stale += _unproven(kept)
    changed = any(not _proven_same(info, new_files.get(name)) for name, info in old_files.items())
    return stale, changed


def _unproven(kept: list[tuple[str, Any]]) -> list[str]:
    """The files of ``kept`` (``(path, (size, hashes))``, in name order) to treat as stale in a directory of unknown
    provenance: each whose bytes do not match when they total at most :data:`VERIFY_BYTES`; beyond it, a sample
    spread over them up to that many bytes is hashed (a copy adopted at each start of a job whose cache root is
    temporary must not hash a whole dataset under the index lock), and one mismatch makes them all stale (a stale
    version's files are all of the old version)."""
    total = sum(info[0] for _, info in kept if isinstance(info[0], int))
    if total <= VERIFY_BYTES:
        return [path for path, info in kept if not _content_matches(path, *info)]
    step, budget = max(1, -(-total // VERIFY_BYTES)), VERIFY_BYTES  # every step-th file: about the budget in all
    for path, info in kept[::step]:
        if budget <= 0:
            break
        if not _content_matches(path, *info):
            return [path for path, _ in kept]
        budget -= info[0] if isinstance(info[0], int) else 0
    return []
