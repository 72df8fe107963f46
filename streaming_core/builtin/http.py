"""Builtin read-only HTTP(S) storage: whole-file GETs with timeouts, so any web server can serve a dataset."""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from typing import Any

from streaming_core.errors import PermanentStorageError, RemoteNotFoundError, StorageError, TruncatedDownloadError
from streaming_core.hookspecs import hookimpl
from streaming_core.registry import RegistryView
from streaming_core.util import redact_url


class HttpBackend:
    """Downloads over HTTP(S) with ``urllib``.

    Options:
        headers: Extra request headers (for example ``{'Authorization': 'Bearer ...'}``); never logged.
    """

    def __init__(self, headers: dict[str, str] | None = None, **options: Any) -> None:
        self.headers = dict(headers or {})

    def _request(self, url: str, method: str) -> urllib.request.Request:
        return urllib.request.Request(url, method=method, headers=self.headers)

    def download(self, url: str, path: str, *, timeout: float) -> None:
        """GET ``url`` into ``path``; a body shorter than its Content-Length is an error."""
        try:
            with urllib.request.urlopen(self._request(url, 'GET'), timeout=timeout) as response:
                declared = response.headers.get('Content-Length')
                with open(path, 'wb') as out:
                    shutil.copyfileobj(response, out, 1 << 20)
                    written = out.tell()
        except urllib.error.HTTPError as err:
            raise _http_error(err, url) from None
        except urllib.error.URLError as err:
            raise StorageError(f'GET {redact_url(url)} failed: {err.reason}') from None
        except (ConnectionError, TimeoutError, OSError) as err:
            if isinstance(err, StorageError):
                raise
            raise StorageError(f'GET {redact_url(url)} failed: {type(err).__name__}: {err}') from None
        if declared is not None and int(declared) != written:
            raise TruncatedDownloadError(f'GET {redact_url(url)} returned {written} of {declared} bytes.')

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """HTTP storage is read-only."""
        raise PermanentStorageError(f'HTTP(S) storage is read-only: cannot upload to {redact_url(url)}.')

    def exists(self, url: str, *, timeout: float) -> bool:
        """HEAD ``url``."""
        try:
            with urllib.request.urlopen(self._request(url, 'HEAD'), timeout=timeout):
                return True
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return False
            raise _http_error(err, url) from None

    def list(self, url: str, *, timeout: float) -> list[str]:
        """HTTP has no listing."""
        raise PermanentStorageError(f'HTTP(S) storage cannot list {redact_url(url)}.')


def _http_error(err: urllib.error.HTTPError, url: str) -> Exception:
    shown = redact_url(url)
    if err.code == 404:
        return RemoteNotFoundError(f'Remote object not found: {shown} (HTTP 404)')
    if err.code in (401, 403):
        return PermanentStorageError(f'Access to {shown} was denied (HTTP {err.code}).')
    return StorageError(f'GET {shown} failed with HTTP {err.code} {err.reason}.')


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``http`` and ``https``."""
    registry.add('http', HttpBackend)
    registry.add('https', HttpBackend)
