"""A stand-in for the Hugging Face Hub on loopback, for tests and offline examples: a server speaking the Hub's HTTP
API paths that ``huggingface_hub`` (and streaming-hf) use.

* ``GET /api/{datasets|models}/{owner}/{name}``: the repository's info at its default branch ``main`` (what
  ``huggingface_hub``'s ``repo_info`` and ``HfFileSystem``, and so ``datasets`` and litdata, ask first);
* ``GET /api/{datasets|models}/{owner}/{name}/revision/{rev}``: the same at a revision: ``{"id", "sha",
  "siblings", "private", "gated", "disabled"}``;
* ``GET /api/{datasets|models}/{owner}/{name}/tree/{rev}[/{path}]?recursive=true``: the entries (``type``,
  ``path``, ``size``, ``oid`` and ``lfs: {oid, size}`` for ``*.parquet``), paginated with ``Link: <...>;
  rel="next"`` past ``page_size`` entries;
* ``GET/HEAD /datasets/{owner}/{name}/resolve/{rev}/{path}`` (``/{owner}/{name}/resolve/...`` for models): the file
  with ``Range`` support, ``X-Repo-Commit`` and ``ETag``; LFS files (``*.parquet``) answer ``302`` to a second
  server on another loopback address (the "CDN"), which records whether an ``Authorization`` header reached it.

Repositories hold commits (``{commit: {path: bytes}}``) and refs (``main``, tags) naming commits, so a test can push
a new commit while a dataset reads the old one. A repository may be private (needs ``Authorization: Bearer
<token>``: else 401 ``RepoNotFound``, as the Hub answers) or gated (403 ``GatedRepo`` without a token it accepts).
Errors carry ``X-Error-Code`` / ``X-Error-Message`` as the Hub's do. No Xet headers are sent. Connections are kept
alive (HTTP/1.1) and answers are sent without Nagle's delay, as a real server's are.

Example::

    hub = HubServer()
    hub.state.repo('datasets', 'me/data').push({'data/train-00000-of-00001.parquet': parquet_bytes})
    os.environ['HF_ENDPOINT'] = hub.url   # then hf://datasets/me/data/... reads from it
    ...
    hub.close()
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = ['HubServer', 'HubState', 'Repo']


@dataclass
class Repo:
    """One repository: commits, refs and access rules."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    private: bool = False
    gated: bool = False
    tokens: tuple[str, ...] = ()

    def push(self, files: dict[str, bytes], ref: str = 'main') -> str:
        """Add a commit holding ``files`` (merged over ``ref``'s files; ``b''``-less deletes not modelled)."""
        base = dict(self.commits.get(self.refs.get(ref, ''), {}))
        base.update(files)
        commit = hashlib.sha1(json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in base.items()))
                              .encode() + str(len(self.commits)).encode()).hexdigest()
        self.commits[commit] = base
        self.refs[ref] = commit
        return commit


class HubState:
    """What the servers serve and what they saw."""

    def __init__(self, page_size: int = 50, latency: float = 0.0) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.page_size = page_size
        #: Seconds each answer waits before it is sent (a network's round trip; 0 on loopback).
        self.latency = latency
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.cdn_authorization: list[str | None] = []
        #: The client address (host, port) of every request, in the order of ``requests``: one port per connection.
        self.peers: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def repo(self, kind: str, repo_id: str, **kwargs: Any) -> Repo:
        """The repository ``repo_id`` of ``kind`` (``datasets``/``models``), created when new."""
        return self.repos.setdefault((kind, repo_id), Repo(**kwargs))

    def count(self, method: str, contains: str) -> int:
        """How many requests of ``method`` had ``contains`` in their path."""
        return sum(1 for m, path, _ in self.requests if m == method and contains in path)


def _blob_oid(data: bytes) -> str:
    return hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest()


class _HubHandler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    #: Headers and body leave as separate writes: without TCP_NODELAY a kept-alive connection waits ~40 ms for the
    #: client's delayed ACK before the body.
    disable_nagle_algorithm = True
    state: HubState
    cdn_base: str

    def log_message(self, *args: Any) -> None:
        pass

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({'error': message}).encode()
        self.send_response(status)
        self.send_header('X-Error-Code', code)
        self.send_header('X-Error-Message', message)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def _json(self, obj: Any, link: str | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        if link:
            self.send_header('Link', f'<{link}>; rel="next"')
        self.end_headers()
        self.wfile.write(body)

    def _access(self, repo: Repo | None) -> bool:
        token = (self.headers.get('Authorization') or '').removeprefix('Bearer ').strip()
        if repo is None or (repo.private and token not in repo.tokens):
            self._error(401, 'RepoNotFound', 'Repository not found')
            return False
        if repo.gated and token not in repo.tokens:
            self._error(403, 'GatedRepo', 'Access to this dataset is restricted.')
            return False
        return True

    def _commit(self, repo: Repo, rev: str) -> str | None:
        rev = unquote(rev)
        if rev in repo.commits:
            return rev
        commit = repo.refs.get(rev)
        if commit is None:
            self._error(404, 'RevisionNotFound', f'Invalid rev id: {rev}')
        return commit

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        with self.state.lock:
            self.state.requests.append((self.command, parts.path, dict(self.headers)))
            self.state.peers.append(self.client_address[:2])
        if self.state.latency:
            time.sleep(self.state.latency)
        segments = parts.path.strip('/').split('/')
        if segments[0] == 'api' and len(segments) == 4 and segments[1] in ('datasets', 'models'):
            segments += ['revision', 'main']  # the repository's info: at its default branch
        if segments[0] == 'api' and len(segments) >= 6 and segments[1] in ('datasets', 'models'):
            kind, repo_id, verb = segments[1], f'{segments[2]}/{segments[3]}', segments[4]
            repo = self.state.repos.get((kind, repo_id))
            if not self._access(repo):
                return
            assert repo is not None
            commit = self._commit(repo, segments[5])
            if commit is None:
                return
            if verb == 'revision' and len(segments) == 6:
                self._json({'id': repo_id, 'sha': commit, 'private': repo.private,
                            'gated': 'auto' if repo.gated else False,
                            'disabled': False, 'siblings': [{'rfilename': n} for n in sorted(repo.commits[commit])]})
            elif verb == 'tree':
                self._tree(repo.commits[commit], unquote('/'.join(segments[6:])), parts.query)
            else:
                self._error(404, 'NotFound', f'unknown API {verb}')
            return
        kind = 'datasets' if segments[0] == 'datasets' else 'models'
        if kind == 'datasets':
            segments = segments[1:]
        if len(segments) >= 5 and segments[2] == 'resolve':
            repo = self.state.repos.get((kind, f'{segments[0]}/{segments[1]}'))
            if not self._access(repo):
                return
            assert repo is not None
            commit = self._commit(repo, segments[3])
            if commit is None:
                return
            name = unquote('/'.join(segments[4:]))
            data = repo.commits[commit].get(name)
            if data is None:
                self._error(404, 'EntryNotFound', f'{name} does not exist on "{commit}"')
                return
            if name.endswith('.parquet'):  # an LFS file: to the CDN, which has no use for the token
                self.send_response(302)
                where = f'{kind}/{_repo_of(segments)}/{commit}/{quote(name)}'
                self.send_header('Location', f'{self.cdn_base}/cdn/{where}')
                self.send_header('X-Repo-Commit', commit)
                self.send_header('X-Linked-Size', str(len(data)))
                self.send_header('X-Linked-Etag', f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header('Content-Length', '0')
                self.end_headers()
                return
            send_bytes(self, data, commit, f'"{_blob_oid(data)}"')
            return
        self._error(404, 'NotFound', 'no such route')

    def _tree(self, files: dict[str, bytes], path: str, query: str) -> None:
        params = parse_qs(query)
        recursive = params.get('recursive', ['false'])[0] == 'true'
        prefix = path.strip('/') + '/' if path.strip('/') else ''
        names = sorted(n for n in files if n.startswith(prefix))
        if prefix and not names:
            self._error(404, 'EntryNotFound', f'{path} does not exist')
            return
        entries, dirs = [], set()
        for name in names:
            rest = name[len(prefix):]
            if not recursive and '/' in rest:
                dirs.add(prefix + rest.split('/', 1)[0])
                continue
            parent = name.rsplit('/', 1)[0] if '/' in name else ''
            while recursive and parent and parent.startswith(prefix.rstrip('/')) and parent != prefix.rstrip('/'):
                dirs.add(parent)
                parent = parent.rsplit('/', 1)[0] if '/' in parent else ''
            data = files[name]
            entry: dict[str, Any] = {'type': 'file', 'oid': _blob_oid(data), 'size': len(data), 'path': name}
            if name.endswith('.parquet'):
                entry['lfs'] = {'oid': hashlib.sha256(data).hexdigest(), 'size': len(data), 'pointerSize': 134}
            entries.append(entry)
        entries += [{'type': 'directory', 'oid': '0' * 40, 'size': 0, 'path': d} for d in sorted(dirs)]
        entries.sort(key=lambda e: e['path'])
        start = int(params.get('cursor', ['0'])[0])
        page = entries[start:start + self.state.page_size]
        link = None
        if start + self.state.page_size < len(entries):
            link = f'{urlsplit(self.path).path}?recursive={str(recursive).lower()}&cursor={start + len(page)}'
        self._json(page, link)


def _repo_of(segments: list[str]) -> str:
    """``owner/name`` of a resolve path's segments."""
    return f'{segments[0]}/{segments[1]}'


def send_bytes(handler: BaseHTTPRequestHandler, data: bytes, commit: str | None, etag: str) -> None:
    """Answer a GET/HEAD with ``data``, honouring a ``Range: bytes=a-b`` header."""
    ranged = handler.headers.get('Range')
    status, body = 200, data
    if ranged and ranged.startswith('bytes='):
        first, _, last = ranged[6:].partition('-')
        start = int(first)
        end = min(int(last) if last else len(data) - 1, len(data) - 1)
        if start >= len(data):
            handler.send_response(416)
            handler.send_header('Content-Range', f'bytes */{len(data)}')
            handler.send_header('Content-Length', '0')
            handler.end_headers()
            return
        status, body = 206, data[start:end + 1]
    handler.send_response(status)
    if status == 206:
        handler.send_header('Content-Range', f'bytes {start}-{end}/{len(data)}')
    handler.send_header('Accept-Ranges', 'bytes')
    handler.send_header('Content-Length', str(len(body)))
    handler.send_header('ETag', etag)
    if commit:
        handler.send_header('X-Repo-Commit', commit)
    handler.end_headers()
    if handler.command != 'HEAD':
        handler.wfile.write(body)


class _CdnHandler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True
    state: HubState

    def log_message(self, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        segments = [unquote(s) for s in urlsplit(self.path).path.strip('/').split('/')]
        with self.state.lock:
            self.state.cdn_authorization.append(self.headers.get('Authorization'))
            self.state.requests.append((self.command, '/cdn' + urlsplit(self.path).path, dict(self.headers)))
            self.state.peers.append(self.client_address[:2])
        if self.state.latency:
            time.sleep(self.state.latency)
        kind, repo, commit, name = segments[1], f'{segments[2]}/{segments[3]}', segments[4], '/'.join(segments[5:])
        data = self.state.repos[(kind, repo)].commits[commit][name]
        send_bytes(self, data, None, f'"{hashlib.sha256(data).hexdigest()}"')


class HubServer:
    """The Hub on ``127.0.0.1`` and its CDN on ``127.0.0.2`` (another host), each on a free port.

    Args:
        page_size: Entries per page of the tree listing.
        latency: Seconds every answer (Hub and CDN) waits before it is sent, to stand for a network's round trip.
    """

    def __init__(self, page_size: int = 50, latency: float = 0.0) -> None:
        self.state = HubState(page_size, latency)
        cdn_handler = type('Cdn', (_CdnHandler,), {'state': self.state})
        self._cdn = ThreadingHTTPServer(('127.0.0.2', 0), cdn_handler)
        self.cdn_url = f'http://127.0.0.2:{self._cdn.server_address[1]}'
        hub_handler = type('Hub', (_HubHandler,), {'state': self.state, 'cdn_base': self.cdn_url})
        self._hub = ThreadingHTTPServer(('127.0.0.1', 0), hub_handler)
        self.url = f'http://127.0.0.1:{self._hub.server_address[1]}'
        self._threads = [threading.Thread(target=s.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
                         for s in (self._hub, self._cdn)]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stop both servers."""
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
