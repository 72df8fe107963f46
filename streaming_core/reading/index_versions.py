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


def _content_matches(path: str, size: Any, hashes: dict[str, str]) -> bool:
    """Whether the local file at ``path`` has ``size`` bytes and the digest ``hashes`` records, by one of its
    algorithms that is installed (the fastest kind first); False when none is, or the file cannot be read."""
    from streaming_core.storage.hashing import hash_file, is_hash
    try:
        if os.path.getsize(path) != size:
            return False
        for name in sorted(hashes, key=lambda n: (not n.startswith('xxh'), n)):
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
    record, or an ``index.json`` copied in by hand), so a file the two indexes prove the same is kept only when its
    own bytes have the recorded size and hash (hashed here, once, when the directory is adopted).
    """
    new_files = _file_map(new)
    old_files = _file_map(old) if old is not None else {}
    stale = []
    real_root = os.path.realpath(local_dir)
    for name in sorted(set(new_files) | set(old_files)):
        path = present_copy(local_dir, name, 'index', real_root)
        if path is None:
            continue
        if old is None or not _proven_same(old_files.get(name), new_files.get(name)):
            stale.append(path)
        elif verify and not _content_matches(path, *new_files[name]):  # type: ignore[misc]
            stale.append(path)
    changed = any(not _proven_same(info, new_files.get(name)) for name, info in old_files.items())
    return stale, changed
