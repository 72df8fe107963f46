"""Builtin local storage: plain paths and ``file://`` URLs (a shared filesystem such as NFS works the same)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from streaming_core.errors import RemoteNotFoundError
from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_core.storage.facade import local_path, temp_name
from streaming_core.storage.url import local_not_found


class LocalBackend:
    """Copies files between local paths. ``options`` are accepted and ignored."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Copy the file at ``url`` to ``path``."""
        source = local_path(url)
        if not os.path.isfile(source):
            raise RemoteNotFoundError(local_not_found(url))
        shutil.copyfile(source, path)

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Copy ``path`` to ``url`` atomically (temporary name, then rename)."""
        dest = local_path(url)
        os.makedirs(os.path.dirname(dest) or '.', exist_ok=True)
        if os.path.abspath(dest) == os.path.abspath(path):
            return
        tmp = temp_name(dest)
        try:
            shutil.copyfile(path, tmp)
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    def exists(self, url: str, *, timeout: float) -> bool:
        """Whether the file exists."""
        return os.path.isfile(local_path(url))

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """``length`` bytes of the file from ``start`` (fewer at its end)."""
        source = local_path(url)
        try:
            with open(source, 'rb') as handle:
                handle.seek(start)
                return handle.read(length)
        except (FileNotFoundError, IsADirectoryError):
            raise RemoteNotFoundError(local_not_found(url)) from None

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """Size and modification time (nanoseconds) of the file."""
        try:
            info = os.stat(local_path(url))
        except FileNotFoundError:
            raise RemoteNotFoundError(local_not_found(url)) from None
        return {'size': info.st_size, 'mtime': info.st_mtime_ns}

    def list(self, url: str, *, timeout: float, linked_dirs: list[str] | None = None) -> list[str]:
        """Every file whose path starts with ``url``, sorted (``file://`` prefixes give ``file://`` URLs). Links to
        directories are not followed; their paths are appended to ``linked_dirs`` when given."""
        prefix = local_path(url)
        is_file_url = url != prefix
        root = prefix if os.path.isdir(prefix) else os.path.dirname(prefix) or '.'
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            if linked_dirs is not None:
                linked_dirs.extend(path for name in dirnames
                                   if os.path.islink(path := os.path.join(dirpath, name)) and path.startswith(prefix))
            for name in filenames:
                full = os.path.join(dirpath, name)
                if full.startswith(prefix):
                    found.append('file://' + full if is_file_url else full)
        return sorted(found)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``file`` (also used for plain paths)."""
    registry.add('file', LocalBackend)
