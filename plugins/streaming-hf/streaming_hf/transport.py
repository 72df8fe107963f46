"""HTTP(S) requests over kept-alive connections, shared by the threads of one process.

Indexing a Hub dataset reads the footer of every Parquet file: two requests per file (the Hub's ``resolve``, then
its CDN). A new TCP connection per request (what ``urllib`` does) costs more than the request itself on a fast
network, so :class:`ConnectionPool` keeps idle connections per host (``scheme://host:port``) and hands them to the
next request of any thread, as ``huggingface_hub``'s HTTP session does. A request on an idle connection the server
has closed meanwhile is sent once more on a new connection (only GET and HEAD are sent, both idempotent).

A response is given back to the pool when it was read to its end (or is small enough to be drained on close);
a response closed early closes its connection. Redirects are not followed here (the backend follows them, to keep
the token to the Hub's host). A host reached through a proxy (``HTTPS_PROXY``...) is not pooled: the caller uses
``urllib``, which honours the proxy settings (read once per process and host: :meth:`ConnectionPool.proxied`).
"""

from __future__ import annotations

import http.client
import ssl
import threading
import urllib.request
from typing import Any
from urllib.parse import urlsplit

__all__ = ['ConnectionPool', 'PooledResponse', 'proxied']

#: Idle connections kept per host.
MAX_IDLE = 32
#: An unread body up to this many bytes is drained on ``close`` so its connection can serve another request.
DRAIN_BYTES = 64 << 10
#: Errors that mean "the server closed the idle connection": the request is sent again on a new one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def proxied(target: str) -> bool:
    """Whether the environment's proxy settings apply to ``target`` (then it is not pooled)."""
    parts = urlsplit(target)
    proxies = urllib.request.getproxies()
    if parts.scheme not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or '')


class PooledResponse:
    """A response whose connection goes back to its pool once the body is read (``status``, ``reason``,
    ``headers``, ``read``, ``close``, as ``urllib``'s responses have)."""

    def __init__(self, pool: ConnectionPool, key: tuple[str, str], connection: http.client.HTTPConnection,
                 response: http.client.HTTPResponse) -> None:
        self._pool = pool
        self._key = key
        self._connection: http.client.HTTPConnection | None = connection
        self._response = response
        self.status = response.status
        self.reason = response.reason
        self.headers = response.headers

    def read(self, amount: int | None = None) -> bytes:
        """Up to ``amount`` bytes of the body (all of it when ``None``)."""
        return self._response.read(amount)

    def close(self) -> None:
        """Give the connection back when the body was read (or drained); else close it."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        response = self._response
        try:
            if not response.isclosed() and response.length is not None and response.length <= DRAIN_BYTES:
                response.read()
        except (OSError, http.client.HTTPException):
            pass
        if response.isclosed() and not response.will_close:
            self._pool.release(self._key, connection)
        else:
            response.close()
            connection.close()

    def __enter__(self) -> PooledResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConnectionPool:
    """Kept-alive HTTP(S) connections of one process (see the module docstring)."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self._idle: dict[tuple[str, str], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._max_idle = max_idle
        self._context: ssl.SSLContext | None = None
        self._proxied: dict[tuple[str, str], bool] = {}

    def proxied(self, target: str) -> bool:
        """Whether a proxy applies to ``target``'s host (:func:`proxied`, remembered per host: reading the proxy
        settings walks the whole environment, which costs more than a request on a fast network)."""
        parts = urlsplit(target)
        key = (parts.scheme, parts.netloc)
        found = self._proxied.get(key)
        if found is None:
            found = self._proxied[key] = proxied(target)
        return found

    def _take(self, key: tuple[str, str], timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """An idle connection to ``key`` (``True``: reused) or a new one."""
        with self._lock:
            idle = self._idle.get(key)
            connection = idle.pop() if idle else None
        if connection is not None:
            connection.timeout = timeout
            if connection.sock is not None:
                connection.sock.settimeout(timeout)
            return connection, True
        scheme, netloc = key
        if scheme == 'https':
            if self._context is None:
                self._context = ssl.create_default_context()
            return http.client.HTTPSConnection(netloc, timeout=timeout, context=self._context), False
        return http.client.HTTPConnection(netloc, timeout=timeout), False

    def release(self, key: tuple[str, str], connection: http.client.HTTPConnection) -> None:
        """Keep ``connection`` for the next request to ``key`` (closed when the pool is full)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < self._max_idle:
                idle.append(connection)
                return
        connection.close()

    def request(self, method: str, target: str, headers: dict[str, str], timeout: float) -> PooledResponse:
        """Send one ``method`` request to ``target`` (an ``http(s)://`` URL) and return its response (any status).

        Raises:
            OSError, http.client.HTTPException: the server cannot be reached or answered nonsense.
        """
        parts = urlsplit(target)
        if parts.scheme not in ('http', 'https'):
            raise ValueError(f'ConnectionPool takes http(s) URLs, got {parts.scheme!r}.')
        key = (parts.scheme, parts.netloc)
        path = (parts.path or '/') + (f'?{parts.query}' if parts.query else '')
        while True:
            connection, reused = self._take(key, timeout)
            try:
                connection.request(method, path, headers=headers)
                response = connection.getresponse()
            except _STALE:
                connection.close()
                if reused:
                    continue  # the server closed it while idle: a new connection (taken when none is idle)
                raise
            except BaseException:
                connection.close()
                raise
            return PooledResponse(self, key, connection, response)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def __repr__(self) -> str:
        with self._lock:
            counts: dict[Any, int] = {f'{s}://{n}': len(c) for (s, n), c in self._idle.items()}
        return f'ConnectionPool(idle={counts})'
