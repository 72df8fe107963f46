"""Parsing ``sftp://[user[:password]@]host[:port]/absolute/path`` URLs."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from streaming_core.plugin_api import PermanentStorageError, redact_url

__all__ = ['SftpUrl', 'parse_sftp_url']


@dataclass(frozen=True)
class SftpUrl:
    """One parsed ``sftp://`` URL.

    Attributes:
        url: The URL as given (it may hold a password: show :attr:`shown` instead).
        host: The host name.
        port: The port, or ``None`` when the URL names none.
        username: The user, or ``None``.
        password: The password, or ``None`` (never shown).
        path: The absolute path on the server.
    """

    url: str
    host: str
    port: int | None
    username: str | None
    password: str | None
    path: str

    def __repr__(self) -> str:
        return f'SftpUrl({self.shown!r})'

    @property
    def shown(self) -> str:
        """The URL without its password, for messages and logs."""
        return redact_url(self.url)

    def child_url(self, path: str) -> str:
        """The URL of another absolute path on the same server, in this URL's form."""
        return self.url[:len(self.url) - len(urlparse(self.url).path)] + path


def parse_sftp_url(url: str, *, need_key: bool) -> SftpUrl:
    """Split an ``sftp://`` URL into its parts (user and password are URL-decoded).

    Raises:
        PermanentStorageError: for another scheme, no host, a bad port, a query or fragment, or (with ``need_key``)
            a URL that names no file.
    """
    parsed = urlparse(url)
    shown = redact_url(url)
    if parsed.scheme.lower() != 'sftp':
        raise PermanentStorageError(f'Expected an sftp:// URL, got {shown}.')
    if not parsed.hostname:
        raise PermanentStorageError(f'Invalid SFTP URL {shown}: it names no host. Use sftp://[USER@]HOST[:PORT]/PATH.')
    if parsed.query or parsed.fragment:
        raise PermanentStorageError(f'Invalid SFTP URL {shown}: a query or fragment is not allowed.')
    try:
        port = parsed.port
    except ValueError:
        raise PermanentStorageError(f'Invalid SFTP URL {shown}: the port is not a number from 1 to 65535.') from None
    path = parsed.path or '/'
    if need_key and path.endswith('/'):
        raise PermanentStorageError(f'Invalid SFTP URL {shown}: it names no file (sftp://HOST/ABSOLUTE/PATH).')
    return SftpUrl(url, parsed.hostname, port, unquote(parsed.username) if parsed.username else None,
                   unquote(parsed.password) if parsed.password else None, path)
