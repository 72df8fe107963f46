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

Uploads, the requests ``huggingface_hub``'s ``HfApi.upload_file`` / ``create_commit`` send over plain HTTP (no Xet):

* ``POST /api/{datasets|models}/{owner}/{name}/preupload/{branch}``: each file's ``uploadMode`` (``lfs`` for a
  ``*.parquet`` name, a file of ``lfs_threshold`` bytes or more, or a binary one: a NUL byte in its sample; else
  ``regular``) and the ``oid`` of the file already at that path;
* ``POST /{datasets/}{owner}/{name}.git/info/lfs/objects/batch``: the LFS batch API (``transfer: basic``): an
  ``upload`` action (a ``PUT`` to the CDN, without the token) and a ``verify`` action, or no action for an object
  already stored; ``POST .../objects/verify`` checks it arrived;
* ``POST /api/{datasets|models}/{owner}/{name}/commit/{branch}`` (NDJSON: a ``header``, then ``file`` with base64
  content, ``lfsFile`` with the sha256 ``oid`` of a stored object, ``deletedFile``): one new commit on the branch,
  made atomically; a ``parentCommit`` that is not the branch's head is refused (412).

Writing needs a token in the repository's ``writers`` (none: 401; another token: 403). Only branches (``main`` and
those made by :meth:`Repo.push`) take commits; a tag or a commit id is answered 404 ``RevisionNotFound``.

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

import base64
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = ['HubServer', 'HubState', 'Repo', 'forget_process_state']


def forget_process_state() -> None:
    """Forget what this process knows of the Hub (branch pins, in the environment too, listings, storage clients),
    as a new process would start. The node's listing copies under the cache root stay."""
    from streaming_core.plugin_api import storage
    from streaming_hf import backend
    backend._PINS.clear()
    backend._LISTINGS.clear()
    backend._LISTED_NAMES.clear()
    backend._SAVED_TOKEN[0] = False
    for name in [n for n in os.environ if n.startswith(backend.PIN_ENV_PREFIX)]:
        os.environ.pop(name, None)
    storage.clear_backend_cache()


@dataclass
class Repo:
    """One repository: commits, refs and access rules.

    Attributes:
        writers: The tokens allowed to commit (none by default: only :meth:`push` writes).
        branches: The refs that take commits (``main`` and every ref :meth:`push` moved); other refs are tags.
        lfs: ``(path, sha256)`` of the files committed as LFS files (besides every ``*.parquet``).
    """

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    private: bool = False
    gated: bool = False
    tokens: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    branches: set[str] = field(default_factory=lambda: {'main'})
    lfs: set[tuple[str, str]] = field(default_factory=set)

    def push(self, files: dict[str, bytes], ref: str = 'main', delete: tuple[str, ...] = ()) -> str:
        """Add a commit holding ``files`` merged over ``ref``'s files, without the paths in ``delete``."""
        base = dict(self.commits.get(self.refs.get(ref, ''), {}))
        base.update(files)
        for name in delete:
            base.pop(name, None)
        commit = hashlib.sha1(json.dumps(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in base.items()))
                              .encode() + str(len(self.commits)).encode()).hexdigest()
        self.commits[commit] = base
        self.refs[ref] = commit
        self.branches.add(ref)
        return commit

    def is_lfs(self, name: str, data: bytes) -> bool:
        """Whether the file ``name`` holding ``data`` is stored with LFS (listed with its sha256, served by the CDN)."""
        return name.endswith('.parquet') or (name, hashlib.sha256(data).hexdigest()) in self.lfs


class HubState:
    """What the servers serve and what they saw."""

    def __init__(self, page_size: int = 50, latency: float = 0.0, lfs_threshold: int = 10 * 1024 * 1024) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        #: Files of this many bytes or more are uploaded with LFS (the Hub's limit for regular files: 10 MB).
        self.lfs_threshold = lfs_threshold
        #: The LFS objects received: ``sha256 -> bytes``.
        self.lfs_objects: dict[str, bytes] = {}
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
                self._tree(repo, repo.commits[commit], unquote('/'.join(segments[6:])), parts.query)
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
            if repo.is_lfs(name, data):  # an LFS file: to the CDN, which has no use for the token
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

    # Uploads.
    def do_POST(self) -> None:
        parts = urlsplit(self.path)
        with self.state.lock:
            self.state.requests.append((self.command, parts.path, dict(self.headers)))
            self.state.peers.append(self.client_address[:2])
        body = read_body(self)
        if self.state.latency:
            time.sleep(self.state.latency)
        segments = [unquote(s) for s in parts.path.strip('/').split('/')]
        if segments[:2] == ['api', 'validate-yaml']:  # create_commit checks a README.md's metadata first
            self._json({'errors': [], 'warnings': []})
            return
        if segments[0] == 'api' and len(segments) == 6 and segments[1] in ('datasets', 'models') \
                and segments[4] in ('preupload', 'commit'):
            repo = self._writable(segments[1], f'{segments[2]}/{segments[3]}')
            if repo is None or not self._branch(repo, segments[5]):
                return
            handle = self._preupload if segments[4] == 'preupload' else self._commit_files
            handle(repo, segments[1], f'{segments[2]}/{segments[3]}', segments[5], body)
            return
        kind = 'datasets' if segments[0] == 'datasets' else 'models'
        rest = segments[1:] if kind == 'datasets' else segments
        if len(rest) == 6 and rest[1].endswith('.git') and rest[2:5] == ['info', 'lfs', 'objects']:
            repo_id = f'{rest[0]}/{rest[1][:-len(".git")]}'
            repo = self._writable(kind, repo_id)
            if repo is None:
                return
            if rest[5] == 'batch':
                self._lfs_batch(kind, repo_id, json.loads(body or b'{}'))
                return
            if rest[5] == 'verify':
                oid = json.loads(body or b'{}').get('oid')
                if oid in self.state.lfs_objects:
                    self._json({'message': 'ok'})
                else:
                    self._error(404, 'NotFound', f'LFS object {oid} was not uploaded')
                return
        self._error(404, 'NotFound', 'no such route')

    def _writable(self, kind: str, repo_id: str) -> Repo | None:
        """The repository if the request may write to it; else the Hub's 401/403 answer is sent and ``None``."""
        repo = self.state.repos.get((kind, repo_id))
        if not self._access(repo):
            return None
        assert repo is not None
        token = (self.headers.get('Authorization') or '').removeprefix('Bearer ').strip()
        if not token:
            self._error(401, 'Unauthorized', 'You must be authenticated to write to this repository.')
            return None
        if token not in repo.writers:
            self._error(403, 'Forbidden', 'You don\'t have the rights to write to this repository.')
            return None
        return repo

    def _branch(self, repo: Repo, rev: str) -> bool:
        """Whether ``rev`` is a branch (commits go to branches only); else a 404 ``RevisionNotFound`` is sent."""
        if rev in repo.branches and rev in repo.refs:
            return True
        what = 'a tag' if rev in repo.refs else 'a commit' if rev in repo.commits else 'not found'
        self._error(404, 'RevisionNotFound', f'Invalid rev id: {rev} is not a branch ({what})')
        return False

    def _preupload(self, repo: Repo, kind: str, repo_id: str, rev: str, body: bytes) -> None:
        files = repo.commits.get(repo.refs[rev], {})
        answers = []
        for item in json.loads(body or b'{}').get('files', []):
            path, size = item['path'], int(item['size'])
            sample = base64.b64decode(item.get('sample', ''))
            lfs = path.endswith('.parquet') or size >= self.state.lfs_threshold or b'\0' in sample
            present = files.get(path)
            oid = None
            if present is not None:
                oid = hashlib.sha256(present).hexdigest() if repo.is_lfs(path, present) else _blob_oid(present)
            answers.append({'path': path, 'uploadMode': 'lfs' if lfs else 'regular', 'shouldIgnore': False,
                            'oid': oid})
        self._json({'files': answers, 'commitOid': repo.refs[rev]})

    def _lfs_batch(self, kind: str, repo_id: str, payload: dict[str, Any]) -> None:
        if payload.get('operation') != 'upload' or 'basic' not in payload.get('transfers', ['basic']):
            self._error(400, 'BadRequest', 'only the upload operation with the basic transfer is served')
            return
        hub = f'http://{self.headers.get("Host")}'
        prefix = 'datasets/' if kind == 'datasets' else ''
        objects = []
        for item in payload.get('objects', []):
            oid, size = str(item['oid']), int(item['size'])
            entry: dict[str, Any] = {'oid': oid, 'size': size, 'authenticated': True}
            if oid not in self.state.lfs_objects:
                entry['actions'] = {
                    'upload': {'href': f'{self.cdn_base}/lfs/{oid}?size={size}', 'header': {}},
                    'verify': {'href': f'{hub}/{prefix}{repo_id}.git/info/lfs/objects/verify', 'header': {}}}
            objects.append(entry)
        body = json.dumps({'transfer': 'basic', 'objects': objects, 'hash_algo': 'sha256'}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/vnd.git-lfs+json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _commit_files(self, repo: Repo, kind: str, repo_id: str, rev: str, body: bytes) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next((line['value'] for line in lines if line.get('key') == 'header'), {})
        files: dict[str, bytes] = {}
        lfs: set[tuple[str, str]] = set()
        delete = []
        for line in lines:
            key, value = line.get('key'), line.get('value', {})
            if key == 'file':
                files[value['path']] = base64.b64decode(value['content'])
            elif key == 'lfsFile':
                data = self.state.lfs_objects.get(value['oid'])
                if data is None:
                    self._error(400, 'BadRequest', f'LFS object {value["oid"]} of {value["path"]} was not uploaded')
                    return
                files[value['path']] = data
                lfs.add((value['path'], value['oid']))
            elif key == 'deletedFile':
                delete.append(value['path'])
            elif key != 'header':
                self._error(400, 'BadRequest', f'unsupported commit operation {key!r}')
                return
        with self.state.lock:  # one commit at a time: each sees the previous one's files
            parent = header.get('parentCommit')
            if parent and not repo.refs[rev].startswith(parent):
                self._error(412, 'PreconditionFailed', f'{rev} has moved on from the parent commit {parent}')
                return
            repo.lfs |= lfs
            repo.lfs -= {(path, hashlib.sha256(data).hexdigest()) for path, data in files.items()
                         if (path, hashlib.sha256(data).hexdigest()) not in lfs}
            commit = repo.push(files, rev, tuple(delete))
        prefix = 'datasets/' if kind == 'datasets' else ''
        self._json({'success': True, 'commitOid': commit, 'pullRequestUrl': None, 'hookOutput': '',
                    'commitUrl': f'http://{self.headers.get("Host")}/{prefix}{repo_id}/commit/{commit}'})

    def _tree(self, repo: Repo, files: dict[str, bytes], path: str, query: str) -> None:
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
            if repo.is_lfs(name, data):
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


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    """The request's body (``Content-Length`` or chunked)."""
    if (handler.headers.get('Transfer-Encoding') or '').lower() == 'chunked':
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b';')[0].strip() or b'0', 16)
            if size == 0:
                while handler.rfile.readline() not in (b'\r\n', b'\n', b''):
                    pass
                return b''.join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get('Content-Length') or 0))


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

    def do_PUT(self) -> None:
        """An LFS upload (``/lfs/{sha256}``): stored when the body's sha256 is the one named."""
        parts = urlsplit(self.path)
        with self.state.lock:
            self.state.cdn_authorization.append(self.headers.get('Authorization'))
            self.state.requests.append((self.command, '/cdn' + parts.path, dict(self.headers)))
            self.state.peers.append(self.client_address[:2])
        data = read_body(self)
        oid = parts.path.rsplit('/', 1)[-1]
        status = 200 if hashlib.sha256(data).hexdigest() == oid else 400
        if status == 200:
            with self.state.lock:
                self.state.lfs_objects[oid] = data
        self.send_response(status)
        self.send_header('Content-Length', '0')
        self.end_headers()


class HubServer:
    """The Hub on ``127.0.0.1`` and its CDN on ``127.0.0.2`` (another host), each on a free port.

    Args:
        page_size: Entries per page of the tree listing.
        latency: Seconds every answer (Hub and CDN) waits before it is sent, to stand for a network's round trip.
        lfs_threshold: Uploaded files of this many bytes or more go through LFS.
    """

    def __init__(self, page_size: int = 50, latency: float = 0.0, lfs_threshold: int = 10 * 1024 * 1024) -> None:
        self.state = HubState(page_size, latency, lfs_threshold)
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
