"""Parsing ``dbfs:/Volumes/...`` (Unity Catalog Volumes) and ``dbfs:/...`` (DBFS) URLs."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

from streaming_core.plugin_api import PermanentStorageError, redact_url

__all__ = ['DbfsUrl', 'parse_dbfs_url']


@dataclass(frozen=True)
class DbfsUrl:
    """One parsed ``dbfs:`` URL.

    Attributes:
        url: The URL as given.
        path: The absolute workspace path (``/Volumes/catalog/schema/volume/key`` or ``/dir/key``).
        volume: Whether the path is in a Unity Catalog volume (served by the Files API).
        prefix: What precedes :attr:`path` in the URL (``dbfs:`` or ``dbfs://``), to build URLs in the input's form.
    """

    url: str
    path: str
    volume: bool
    prefix: str

    @property
    def shown(self) -> str:
        """The URL for messages (credentials never appear in ``dbfs:`` URLs, but stay consistent)."""
        return redact_url(self.url)

    def child_url(self, path: str) -> str:
        """The URL of another absolute workspace path, in this URL's form."""
        return self.prefix + path


def parse_dbfs_url(url: str, *, need_key: bool) -> DbfsUrl:
    """Split ``dbfs:/Volumes/<catalog>/<schema>/<volume>/<path>`` or ``dbfs:/<path>`` (``dbfs:///...`` is the
    same URL) into a :class:`DbfsUrl`. The path is the URL's text as written (``?``, ``#`` and ``%`` included).

    Raises:
        PermanentStorageError: for another scheme, a host in the URL, a volume path without catalog,
            schema and volume, or (with ``need_key``) a URL that names no file.
    """
    parsed = urlparse(url)
    shown = redact_url(url)
    if parsed.scheme.lower() != 'dbfs':
        raise PermanentStorageError(f'Expected a dbfs: URL, got {shown}.')
    if parsed.netloc:
        raise PermanentStorageError(
            f'Invalid Databricks URL {shown}: {parsed.netloc!r} is read as a host name. Write dbfs:/Volumes/CATALOG/'
            f'SCHEMA/VOLUME/PATH for a Unity Catalog volume or dbfs:/PATH for DBFS (one slash after "dbfs:").')
    path = url.partition(':')[2]  # as written: `?` and `#` are characters of file names, not a query or fragment
    if path.startswith('//'):
        path = path[2:]
    if not path.startswith('/'):
        raise PermanentStorageError(f'Invalid Databricks URL {shown}: the path must be absolute (dbfs:/PATH).')
    prefix = url[:len(url) - len(path)] if url.endswith(path) else 'dbfs:'
    parts = path.split('/')
    volume = len(parts) > 1 and parts[1] == 'Volumes'
    if volume and (len(parts) < 5 or not all(parts[2:5])):
        raise PermanentStorageError(f'Invalid Unity Catalog URL {shown}: use dbfs:/Volumes/CATALOG/SCHEMA/VOLUME/PATH.')
    if need_key and (path.endswith('/') or (volume and len(parts) < 6) or path == '/'):
        raise PermanentStorageError(f'Invalid Databricks URL {shown}: it names no file.')
    return DbfsUrl(url, path, volume, prefix)
