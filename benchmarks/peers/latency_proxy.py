"""A reverse proxy on loopback that adds a fixed delay to every request (a stand-in for network round trips).

``python latency_proxy.py --upstream http://127.0.0.1:PORT --delay 0.03`` prints ``PORT <its port>`` on stdout,
then serves until killed. Each request waits ``--delay`` seconds, is forwarded unchanged (method, path, query,
headers, body) over a keep-alive connection per proxy thread, and its answer is streamed back in 1 MiB pieces
(so a large object is not held whole in memory, and the client sees the first bytes early). Optionally
``--mbps`` caps each response's rate. ``GET /__proxy_stats`` answers ``{"requests": n, "bytes": n}`` (requests
counted on arrival, body bytes as they are sent) since the previous call, and resets them; it is not forwarded.

Standard library only; runs with either virtualenv's interpreter.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP = {'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
        'transfer-encoding', 'upgrade'}
CHUNK = 1 << 20


class Stats:
    """Requests and response bytes since the last read (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def request(self) -> None:
        """Count one request (on arrival)."""
        with self.lock:
            self.requests += 1

    def sent(self, count: int) -> None:
        """Count response body bytes (as they are sent)."""
        with self.lock:
            self.bytes += count

    def take(self) -> dict[str, int]:
        """The counts so far, then zero them."""
        with self.lock:
            out = {'requests': self.requests, 'bytes': self.bytes}
            self.requests = self.bytes = 0
        return out


class Handler(BaseHTTPRequestHandler):
    """Delay, forward, stream back."""

    protocol_version = 'HTTP/1.1'
    server: 'ProxyServer'

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - silence the access log
        return

    def _upstream(self) -> http.client.HTTPConnection:
        local = self.server.local
        conn = getattr(local, 'conn', None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=120)
        return conn

    def _dispatch(self) -> None:
        if self.path == '/__proxy_stats':
            body = json.dumps(self.server.stats.take()).encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.server.stats.request()
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else None
        if self.server.delay:
            time.sleep(self.server.delay)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        for attempt in range(2):  # a kept-alive upstream connection may have been closed: reconnect once
            conn = self._upstream()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self.server.local.conn = None
                if attempt:
                    raise
        self.send_response(response.status, response.reason)
        declared = None
        for name, value in response.getheaders():
            if name.lower() == 'content-length':
                declared = value
            elif name.lower() not in _HOP:
                self.send_header(name, value)
        payload = b'' if self.command == 'HEAD' else None
        if declared is None and payload is None:  # unknown length: read it all to frame it
            payload = response.read()
            declared = str(len(payload))
        self.send_header('Content-Length', declared or '0')
        self.end_headers()
        sent = 0
        if self.command != 'HEAD':
            started = time.monotonic()
            while True:
                piece = payload if payload is not None else response.read(CHUNK)
                if not piece:
                    break
                self.wfile.write(piece)
                self.server.stats.sent(len(piece))
                sent += len(piece)
                if self.server.mbps:
                    ahead = sent / (self.server.mbps * 1e6 / 8) - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                if payload is not None:
                    break
        response.read()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _dispatch


class ProxyServer(ThreadingHTTPServer):
    """The listening server with its upstream, delay and counters."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that hangs up mid-answer (a run stopped early) is expected

    def __init__(self, upstream: str, delay: float, mbps: float | None) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or '127.0.0.1', parts.port or 80
        self.delay = delay
        self.mbps = mbps
        self.stats = Stats()
        self.local = threading.local()
        super().__init__(('127.0.0.1', 0), Handler)


def main() -> None:
    """Start the proxy and print its port."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--upstream', required=True)
    parser.add_argument('--delay', type=float, default=0.03, help='seconds added to every request')
    parser.add_argument('--mbps', type=float, help='cap each response at this many megabits per second')
    args = parser.parse_args()
    server = ProxyServer(args.upstream, args.delay, args.mbps)
    print(f'PORT {server.server_address[1]}', flush=True)
    sys.stdout.flush()
    server.serve_forever(poll_interval=0.1)


if __name__ == '__main__':
    main()
