"""Builtin read-only HTTP(S) storage: whole-file and ranged GETs with timeouts, so any web server can serve a dataset.

Uses only the standard library (``urllib``). Every request carries the caller's timeout. Status codes map to
the core's errors: 404 and 410 are :class:`RemoteNotFoundError` (never retried); 401, 403 and other 4xx are
:class:`PermanentStorageError`; 408, 429 and 5xx, connection errors, timeouts and bodies shorter than their
``Content-Length`` are retryable :class:`StorageError` (a short body is a :class:`TruncatedDownloadError`).

Redirects are followed, but credentials (``Authorization``, from ``bearer_token``, ``basic_auth`` or a ``user:pass@``
URL, cookies, and every header of the ``headers`` option but ``User-Agent`` and ``Accept*``) go only to the origin
(scheme, host and port) the request was made to, or its ``https`` upgrade: a redirect to another origin (a CDN,
another site) drops them, as ``requests`` and ``huggingface_hub`` drop ``Authorization``. A ranged read checks that
the answer is the range asked (``Content-Range``), and a whole-object answer that it is not cut short. ``stat`` is a
HEAD (``ETag``, ``Content-Length``, ``Last-Modified``): a job notices a dataset rewritten under it as on an object
store.
"""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError, StorageError, TruncatedDownloadError
from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_core.storage.facade import check_options
from streaming_core.storage.redact import redact_url
from streaming_core.storage.store_answers import check_content_range

__all__ = ['HttpBackend', 'OPTIONS']

#: Every option ``HttpBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'headers', 'verify', 'bearer_token', 'basic_auth', 'validators'})

_RETRYABLE_STATUS = {408, 425, 429}
#: Headers that carry credentials (as ``urllib.request.Request`` spells them): never sent to another origin.
_CREDENTIAL_HEADERS = ('Authorization', 'Proxy-authorization', 'Cookie')
_DEFAULT_PORTS = {'http': 80, 'https': 443}
#: The headers of the ``headers`` option that follow a redirect to another origin (a credential may have any name).
_PORTABLE_NAME = re.compile(r'(?i)user-agent|accept(-.*)?')


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handler copies every header to the new location; this one drops the credentials, and every
    header of the ``headers`` option but ``User-Agent`` and ``Accept*`` (a credential may be named anything:
    ``X-Api-Key``, ``Private-Token``, ``X-Goog-User-Project``...), when the redirect leaves the origin (scheme, host,
    port) of the request it answers. As ``requests`` does, an upgrade of
    ``http`` to ``https`` on the same host and default ports keeps them."""

    def __init__(self, own_headers: Any = ()) -> None:
        super().__init__()
        self._drop = {name.capitalize() for name in (*_CREDENTIAL_HEADERS, *own_headers)
                      if name in _CREDENTIAL_HEADERS or not _PORTABLE_NAME.fullmatch(name)}

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not _same_origin(req.full_url, new.full_url):
            for name in self._drop:
                new.remove_header(name)
        return new


def _same_origin(old: str, new: str) -> bool:
    before, after = _origin(old), _origin(new)
    upgrade = before[0] == 'http' and after[0] == 'https' and before[2] == 80 and after[2] == 443
    return before == after or (upgrade and before[1] == after[1])


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a number: never the same origin as a valid URL
        port = -1
    return scheme, (parts.hostname or '').lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


class HttpBackend:
    """Downloads over HTTP(S) with ``urllib``; uploads and listings are refused (the store is read-only).

    Options:
        headers: Extra request headers (for example ``{'Authorization': 'Bearer ...'}``); never logged.
        bearer_token: Shorthand for ``headers={'Authorization': 'Bearer <token>'}``.
        basic_auth: ``(user, password)`` for HTTP Basic authentication. ``https://user:pass@host/...`` URLs
            work too (the credentials move into the header and out of every message).
        verify: ``True`` (default: the system's CA store), ``False`` (no TLS verification), or the path of a
            CA bundle (PEM) to trust, for example a self-signed server's certificate.
        validators: ``True`` (default): :meth:`stat` reads the server's ``ETag`` and ``Last-Modified``. ``False``:
            it reports nothing, so a dataset's version is its ``index.json`` bytes; for servers whose validators
            differ between requests for one file (replicas behind a load balancer deployed separately), which would
            otherwise look like a dataset rewritten at every request.
    """

    def __init__(self, **options: Any) -> None:
        check_options('http(s)', options, OPTIONS)
        self.headers = {str(k): str(v) for k, v in dict(options.get('headers') or {}).items()}
        token = options.get('bearer_token')
        if token:
            self.headers['Authorization'] = f'Bearer {token}'
        basic = options.get('basic_auth')
        if basic:
            if not isinstance(basic, (tuple, list)) or len(basic) != 2:
                raise PermanentStorageError('Invalid http(s) option basic_auth: give a (user, password) pair.')
            self.headers['Authorization'] = _basic(str(basic[0]), str(basic[1]))
        self.verify = options.get('verify', True)
        if not isinstance(self.verify, (bool, str)):
            raise PermanentStorageError(f'Invalid http(s) option verify={self.verify!r}: use True, False or the '
                                        f'path of a CA bundle.')
        self.validators = options.get('validators', True)
        if not isinstance(self.validators, bool):
            raise PermanentStorageError(f'Invalid http(s) option validators={self.validators!r}: use True or False.')
        self._context: ssl.SSLContext | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state['_context'] = None  # SSL contexts cannot be pickled; rebuilt on first use
        return state

    def __repr__(self) -> str:
        return f'HttpBackend(headers={sorted(self.headers)}, verify={self.verify!r})'

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self._context is None:
            if self.verify is False:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            elif isinstance(self.verify, str):
                try:
                    context = ssl.create_default_context(cafile=self.verify)
                except (OSError, ssl.SSLError) as err:
                    raise PermanentStorageError(f'Cannot load the CA bundle {self.verify!r} given as verify: '
                                                f'{err}') from None
            else:
                context = ssl.create_default_context()
            self._context = context
        return self._context

    def _request(self, url: str, method: str, extra: dict[str, str] | None = None) -> urllib.request.Request:
        parts = urlsplit(url)
        if parts.scheme.lower() not in ('http', 'https') or not parts.hostname:
            raise PermanentStorageError(f'Invalid HTTP(S) URL {redact_url(url)}: expected http(s)://host/path.')
        headers = dict(self.headers)
        if parts.username is not None or parts.password is not None:
            headers.setdefault('Authorization', _basic(unquote(parts.username or ''), unquote(parts.password or '')))
            netloc = parts.hostname + (f':{parts.port}' if parts.port else '')
            url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ''))
        headers.update(extra or {})
        return urllib.request.Request(url, method=method, headers=headers)

    def _open(self, request: urllib.request.Request, timeout: float) -> Any:
        """Send ``request`` (``urlopen``'s handlers, with credentials kept to the request's origin on redirects)."""
        handlers: list[Any] = [_SameOriginCredentials(self.headers)]
        if request.type == 'https' or self.verify is not True:  # an http URL may be redirected to https
            handlers.append(urllib.request.HTTPSHandler(context=self._ssl_context()))
        return urllib.request.build_opener(*handlers).open(request, timeout=timeout)

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """GET ``url`` into ``path``; a body that ends before its ``Content-Length`` is a truncated download."""
        shown = redact_url(url)
        try:
            response = self._open(self._request(url, 'GET'), timeout)
        except urllib.error.HTTPError as err:
            raise _http_error(err.code, err.reason, 'GET', url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise _transport_error(err, 'GET', url) from None
        with response:
            declared = response.headers.get('Content-Length')
            written = 0
            with open(path, 'wb') as out:
                while True:
                    try:
                        chunk = response.read(1 << 20)
                    except (http.client.HTTPException, OSError) as err:
                        if isinstance(err, http.client.IncompleteRead):
                            written += len(err.partial)
                        raise TruncatedDownloadError(
                            f'GET {shown} ended after {written} of {declared or "an unknown number of"} bytes: '
                            f'{type(err).__name__}: {err}') from None
                    if not chunk:
                        break
                    out.write(chunk)
                    written += len(chunk)
        if declared is not None and declared.isdigit() and int(declared) != written:
            raise TruncatedDownloadError(f'GET {shown} returned {written} of {declared} bytes.')

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """GET ``url`` with ``Range: bytes=start-end``: the bytes that exist in that range (fewer at the end of the
        object; none past it). A server that ignores the range (``200``) is read up to the range's end only.

        A ``206`` whose ``Content-Range`` is not the range asked (another start, or an earlier end that is not the
        object's end), and a ``200`` body that ends before ``min(end + 1, Content-Length)`` bytes, raise a retryable
        :class:`StorageError`: a short result would be taken for the end of the object."""
        shown = redact_url(url)
        if length <= 0:
            return b''
        end = start + length - 1
        try:
            response = self._open(self._request(url, 'GET', {'Range': f'bytes={start}-{end}'}), timeout)
        except urllib.error.HTTPError as err:
            if err.code == 416:  # the range starts at or past the end of the object
                return b''
            raise _http_error(err.code, err.reason, 'GET', url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise _transport_error(err, 'GET', url) from None
        with response:
            try:
                declared = response.headers.get('Content-Length')
                if response.status == 206:
                    data = response.read()
                    if declared is not None and declared.isdigit() and int(declared) != len(data):
                        raise TruncatedDownloadError(f'GET {shown} (range {start}-{end}) returned {len(data)} of '
                                                     f'{declared} bytes.')
                    check_content_range(response.headers.get('Content-Range'), start, end, len(data),
                                         f'GET {shown}')
                    return data[:length]
                data = response.read(end + 1)  # the whole object from byte 0: keep what the range covers
                if declared is not None and declared.isdigit() and len(data) < min(end + 1, int(declared)):
                    raise TruncatedDownloadError(f'GET {shown} (range {start}-{end}, answered with the whole object) '
                                                 f'ended after {len(data)} of {declared} bytes.')
            except http.client.IncompleteRead as err:
                raise TruncatedDownloadError(f'GET {shown} (range {start}-{end}) ended early: {err}') from None
            except (http.client.HTTPException, OSError) as err:
                raise _transport_error(err, 'GET', url) from None
        return data[start:end + 1]

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """HTTP storage is read-only."""
        raise PermanentStorageError(f'HTTP(S) storage is read-only: cannot upload {path} to {redact_url(url)}. '
                                    f'Write to a local directory or an object store and serve that over HTTP.')

    def exists(self, url: str, *, timeout: float) -> bool:
        """HEAD ``url`` (falling back to a one-byte ranged GET where HEAD is not allowed)."""
        try:
            with self._open(self._request(url, 'HEAD'), timeout):
                return True
        except urllib.error.HTTPError as err:
            if err.code in (404, 410):
                return False
            if err.code not in (405, 501):
                raise _http_error(err.code, err.reason, 'HEAD', url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise _transport_error(err, 'HEAD', url) from None
        try:
            with self._open(self._request(url, 'GET', {'Range': 'bytes=0-0'}), timeout) as response:
                response.read(1)
                return True
        except urllib.error.HTTPError as err:
            if err.code in (404, 410):
                return False
            raise _http_error(err.code, err.reason, 'GET', url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise _transport_error(err, 'GET', url) from None

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """HEAD ``url``: ``{'etag', 'size', 'mtime'}`` from its ``ETag``, ``Content-Length`` and ``Last-Modified``
        (what tells a rewritten dataset from the version a job read); empty when the server gives neither an
        ``ETag`` nor a ``Last-Modified``, refuses HEAD, or the ``validators`` option is ``False`` (the caller then
        compares bytes).

        Raises:
            RemoteNotFoundError: there is no such object.
        """
        if not self.validators:
            return {}
        try:
            with self._open(self._request(url, 'HEAD'), timeout) as answer:
                headers = answer.headers
        except urllib.error.HTTPError as err:
            if err.code in (405, 501):
                return {}
            raise _http_error(err.code, err.reason, 'HEAD', url) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            raise _transport_error(err, 'HEAD', url) from None
        etag, modified, length = headers.get('ETag'), headers.get('Last-Modified'), headers.get('Content-Length')
        if not etag and not modified:
            return {}
        return {'etag': etag or None, 'mtime': modified or None,
                'size': int(length) if length and length.strip().isdigit() else None}

    def list(self, url: str, *, timeout: float) -> list[str]:
        """HTTP has no listing."""
        raise PermanentStorageError(f'HTTP(S) storage cannot list {redact_url(url)}: a web server has no listing '
                                    f'API. Read the dataset through its index.json instead.')


def _basic(user: str, password: str) -> str:
    return 'Basic ' + base64.b64encode(f'{user}:{password}'.encode()).decode('ascii')


def _http_error(code: int, reason: str, method: str, url: str) -> StorageError:
    shown = redact_url(url)
    if code in (404, 410):
        return RemoteNotFoundError(f'Remote object not found: {shown} (HTTP {code})')
    if code in (401, 403):
        return PermanentStorageError(f'{method} {shown} was denied (HTTP {code} {reason}): check the credentials '
                                     f'(headers, bearer_token or basic_auth storage options).')
    if code >= 500 or code in _RETRYABLE_STATUS:
        return StorageError(f'{method} {shown} failed with HTTP {code} {reason}.')
    return PermanentStorageError(f'{method} {shown} was rejected with HTTP {code} {reason}.')


def _transport_error(err: BaseException, method: str, url: str) -> StorageError:
    shown = redact_url(url)
    if isinstance(err, StorageError):
        return err
    reason = getattr(err, 'reason', None)
    if isinstance(reason, ssl.SSLCertVerificationError) or isinstance(err, ssl.SSLCertVerificationError):
        return PermanentStorageError(f'{method} {shown} failed TLS verification: {reason or err}. Pass '
                                     f'verify="/path/to/ca.pem" (or verify=False) in storage_options.')
    detail = reason if reason is not None else err
    return StorageError(f'{method} {shown} failed: {type(detail).__name__}: {detail}')


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``http`` and ``https``."""
    registry.add('http', HttpBackend)
    registry.add('https', HttpBackend)
