"""Storage URLs: their scheme (:func:`url_scheme`, :func:`is_remote`, :func:`local_path`), joining names onto
them (:func:`join`), refusing mistyped ones (:func:`check_location`), and a URL parsed once (:class:`StorageURL`:
scheme, bucket, key and the redacted form shown in messages).

Storage backends receive URLs as strings (``s3://bucket/path/to/shard.mds``); :meth:`StorageURL.parse` checks the
scheme, the bucket and (optionally) the key once and gives an object the backend passes around, with
:attr:`StorageURL.redacted` for every message and log line (credentials in the user-info part and signature-like query
parameters masked)::

    url = StorageURL.parse('s3://bucket/dir/shard.00000.mds', scheme='s3', need_key=True)
    url.bucket, url.key          # ('bucket', 'dir/shard.00000.mds')
    url.child('dir/other.mds')   # StorageURL('s3://bucket/dir/other.mds')
    StorageURL.parse('oci://b@ns/k', scheme='oci', namespace=True).namespace   # 'ns'
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from streaming_core.errors import PermanentStorageError
from streaming_core.storage.redact import redact_url

__all__ = ['StorageURL', 'url_scheme', 'is_remote', 'local_path', 'local_not_found', 'join', 'check_location',
           'check_output', 'check_places']

#: Schemes whose URLs are also written with one slash (the reference's ``dbfs:/Volumes/...``).
_SINGLE_SLASH_SCHEMES = frozenset({'dbfs'})


def url_scheme(url: str) -> str:
    """The URL scheme of ``url``, lowercased; ``''`` for a plain local path."""
    if not isinstance(url, str):
        raise TypeError(f'Expected a path or URL string, got {type(url).__name__}.')
    if '://' not in url:
        head, sep, _ = url.partition(':/')
        return head.lower() if sep and head.lower() in _SINGLE_SLASH_SCHEMES else ''
    return urlparse(url).scheme.lower()


_MISTYPED = re.compile(r'([A-Za-z][A-Za-z0-9+.-]+):/(?!/)')
_NO_SLASH = re.compile(r'([A-Za-z][A-Za-z0-9+.-]+):(?![/\\])')


def check_location(value: str, what: str) -> None:
    """Refuse a location that is a URL written wrong, which would otherwise be taken for a local path: a slash
    missing (``s3:/bucket/x``, a local directory ``s3:``), both missing (``gs:bucket/x``, for a registered storage
    scheme) or nothing after the scheme (``s3://``).

    Raises:
        ValueError: naming ``what`` (``'remote'``, ``'out'``...), the value and the URL meant.
    """
    match = _MISTYPED.match(value)
    if match and match.group(1).lower() not in _SINGLE_SLASH_SCHEMES:  # file:/x too: read as a directory 'file:'
        scheme = match.group(1)
        meant = value[match.end() - 1:] if scheme.lower() == 'file' else value[match.end():]  # file:///abs/path
        raise ValueError(f'`{what}` {redact_url(value)!r} is a URL with a slash missing, which would be read as a '
                         f'local directory named {scheme + ":"!r}; write {scheme}://{redact_url(meant)}.')
    if '://' in value and is_remote(value) and not value.split('://', 1)[1].strip('/'):
        raise ValueError(f'`{what}` {value!r} names no bucket, host or path after its scheme.')
    match = _NO_SLASH.match(value)
    if match and match.group(1).lower() not in _SINGLE_SLASH_SCHEMES:
        from streaming_core.machinery.lookup import get_registry
        if match.group(1).lower() in get_registry('storage'):  # a storage scheme: not a directory named so
            raise ValueError(f'`{what}` {redact_url(value)!r} is a {match.group(1)} URL without its "//", which would '
                             f'be read as a local directory; write {match.group(1)}://{redact_url(value[match.end():])}.')


def check_output(out: Any) -> None:
    """:func:`check_location` of a writer's or a merge's ``out``: a directory or URL, or a ``(local, remote)`` pair
    (any other value is left to the caller's own check)."""
    for value in [out] if isinstance(out, str) else out if isinstance(out, (tuple, list)) else []:
        if isinstance(value, str):
            check_location(value, 'out')


def check_places(remote: str | None, local: str | None) -> None:
    """Refuse a stream's ``remote`` and ``local`` that cannot name what they should: a mistyped URL
    (:func:`check_location`), an http(s) ``remote`` with a query string or fragment (file names are joined onto it
    as onto a directory, so a signature could not follow them), a ``local`` that is a file.

    Raises:
        ValueError: naming the argument and what to give instead.
    """
    for value, what in ((remote, 'remote'), (local, 'local')):
        if value:
            check_location(value, what)
    if remote and url_scheme(remote) in ('http', 'https') and ('?' in remote or '#' in remote):
        raise ValueError(f'`remote` {redact_url(remote)!r} has a query string or fragment: file names are joined '
                         f'onto `remote` as onto a directory, so a query (a signed URL, a token) cannot follow '
                         f'them. Give the directory URL alone and the credential in `storage_options` '
                         f"({{'bearer_token': ...}} or {{'headers': {{...}}}}); for Azure Blob Storage with a SAS, "
                         f"use azure://<account>.blob.core.windows.net/<container>/<path> with "
                         f"storage_options={{'sas_token': ...}}.")
    if local and os.path.exists(local_path(local)) and not os.path.isdir(local_path(local)):
        raise ValueError(f'`local` {local!r} is a file, not a directory: give the directory that holds (or will '
                         f'hold) the local copy of the dataset.')

def is_remote(url: str | None) -> bool:
    """Whether ``url`` names a non-local location (a scheme other than ``file``)."""
    return bool(url) and url_scheme(url) not in ('', 'file')


def local_path(url: str) -> str:
    """The filesystem path of a local path or ``file://`` URL."""
    if url_scheme(url) == 'file':
        from urllib.parse import unquote
        return unquote(urlparse(url).path)
    return url


def local_not_found(url: str) -> str:
    """The message for a local path or ``file://`` URL that does not exist, naming the absolute path a relative one
    was looked for at (it depends on the working directory the job was started from)."""
    path = local_path(url)
    if os.path.isabs(path):
        return f'Remote object not found: {url}'
    return (f'Remote object not found: {url} (a relative path, looked for at {os.path.abspath(path)}, from the '
            f'working directory {os.getcwd()})')


def join(root: str, *parts: str) -> str:
    """Join path parts onto a local path or URL (URLs always use ``/``)."""
    parts = tuple(p for p in parts if p)
    if not parts:
        return root
    if url_scheme(root) == '':
        return os.path.join(root, *parts)
    return _url_join(root, parts)


def _url_join(root: str, parts: tuple[str, ...]) -> str:
    out = root.rstrip('/')
    for part in parts:
        out = out + '/' + part.strip('/')
    return out



@dataclass(frozen=True)
class StorageURL:
    """One parsed ``scheme://netloc/key`` URL.

    Attributes:
        url: The URL as given.
        scheme: The scheme, lowercase (``'s3'``).
        netloc: The part after ``//`` up to the first ``/`` (``'bucket'``, ``'bucket@namespace'`` for OCI).
        bucket: The bucket or container: the netloc, or its part before ``@`` when parsed with
            ``namespace=True``.
        namespace: The part after ``@`` when parsed with ``namespace=True`` (OCI), else ``''``.
        key: The path after the netloc, without its leading ``/`` (``''`` for a bucket root).
        query: The query string (without ``?``), kept for presigned or SAS URLs.
    """

    url: str
    scheme: str
    netloc: str
    bucket: str
    key: str
    query: str = ''
    namespace: str = ''

    @classmethod
    def parse(cls, url: str, *, scheme: str | None = None, need_key: bool = False, label: str | None = None,
              bucket_word: str = 'bucket', usage: str | None = None, unquote_key: bool = False,
              namespace: bool = False, literal_key: bool = False) -> StorageURL:
        """Parse ``url``, checking its scheme, that it names a bucket and, with ``need_key``, an object.

        Args:
            url: The URL.
            scheme: The scheme it must have (case-insensitive); None accepts any.
            need_key: Refuse a URL that names no object (no key, or one ending in ``/``).
            label: How the URL kind is named in errors (default: the scheme).
            bucket_word: What the netloc names, for errors (``'container or account'`` for Azure).
            usage: The URL form suggested in errors (default ``scheme://BUCKET/KEY``); ``''`` suggests none.
            unquote_key: Percent-decode the key (Azure blob names).
            namespace: Split ``bucket@namespace`` netlocs (OCI).
            literal_key: The key is the URL's text after the netloc as it is, ``?`` and ``#`` included (object stores,
                where they are characters of object names; there is then no query).

        Raises:
            PermanentStorageError: for another scheme, a missing bucket, or (with ``need_key``) a missing object;
                the message shows the redacted URL.
        """
        parsed = urlparse(url)
        shown = redact_url(url)
        found = parsed.scheme.lower()
        label = label or scheme or found
        if scheme is not None and found != scheme:
            article = 'an' if scheme[:1] in 'aeiou' else 'a'
            raise PermanentStorageError(f'Expected {article} {scheme}:// URL, got {shown}.')
        hint = f' Use {usage}.' if usage else ('' if usage == '' else f' Use {found}://BUCKET/KEY.')
        if not parsed.netloc:
            raise PermanentStorageError(f'Invalid {label} URL {shown}: it names no {bucket_word}.{hint}')
        path, query = parsed.path, parsed.query
        if literal_key:
            netloc, _, path = url.partition('://')[2].partition('/')
            parsed = parsed._replace(netloc=netloc)
            path, query = '/' + path, ''
        key = (unquote(path) if unquote_key else path).lstrip('/')
        if need_key and (not key or key.endswith('/')):
            raise PermanentStorageError(f'Invalid {label} URL {shown}: it names no object.{hint}')
        bucket, _, space = parsed.netloc.partition('@') if namespace else (parsed.netloc, '', '')
        if not bucket:
            raise PermanentStorageError(f'Invalid {label} URL {shown}: it names no {bucket_word}.{hint}')
        return cls(url, found, parsed.netloc, bucket, key, query, space)

    @property
    def redacted(self) -> str:
        """The URL with credentials masked: what messages and logs show."""
        return redact_url(self.url)

    @property
    def base(self) -> str:
        """``scheme://netloc/``: the root that :meth:`child` keys are relative to."""
        return f'{self.scheme}://{self.netloc}/'

    def child(self, key: str) -> StorageURL:
        """The URL of another key in the same bucket (same scheme and netloc)."""
        key = key.lstrip('/')
        return StorageURL(f'{self.base}{key}', self.scheme, self.netloc, self.bucket, key, '', self.namespace)

    def __str__(self) -> str:
        return self.redacted

    def __repr__(self) -> str:
        return f'StorageURL({self.redacted!r})'  # never the credentials a URL may carry
