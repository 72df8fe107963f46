"""The ``hf://`` storage backend: a Hugging Face Hub repository over the Hub's HTTP API.

Requests (the paths ``huggingface_hub`` uses, against ``HF_ENDPOINT``, default ``https://huggingface.co``):

* ``GET /api/{datasets|models}/{repo}/revision/{revision}``: a branch or tag resolved to its commit, once per
  process and revision (a commit id is used as it is). Every later request names the commit, so a push during
  training cannot mix two versions. The commit is also put in the environment, so processes started from this one
  (spawned DataLoader workers) use the same commit.
* ``GET /api/{datasets|models}/{repo}/tree/{commit}/{path}?recursive=true``: the listing, following the ``Link:
  <...>; rel="next"`` pages; sizes, and as etags the file's LFS sha256 (or its git blob id). A commit's tree never
  changes, so it is listed once per node (:mod:`streaming_hf.listings`: every other process reads that copy).
* ``GET/HEAD /{datasets/}{repo}/resolve/{commit}/{path}``: downloads, existence checks and ranged reads (``Range:
  bytes=a-b``). Redirects (the Hub sends LFS files to its CDN) are followed, and the token is sent to the Hub's own
  host only, never to another host.

Requests go over kept-alive connections shared by the process's threads (:mod:`streaming_hf.transport`), or through
``urllib`` when a proxy applies to the host.

The token comes from the ``token`` storage option, else ``$HF_TOKEN`` (read without importing ``huggingface_hub``),
else ``huggingface_hub.get_token()`` (the rest of its configuration: ``HF_TOKEN_PATH``, the token file of
``huggingface-cli login``...; looked up once per process); ``HF_HUB_DISABLE_IMPLICIT_TOKEN=1`` sends no token but
the option's. It is registered as a secret so it is masked in logs, and it never appears in errors or reprs.
``HF_HUB_OFFLINE=1`` makes every request fail at once with a message saying so. A 401 or 403 (a private or gated
repository, a bad token) is a permanent error saying what to do.

Uploads (``upload``) commit one file each to a branch through ``huggingface_hub``'s client: the preupload, LFS batch
and commit APIs, over plain HTTP (:mod:`streaming_hf.upload`). A commit drops this process's pin of the branch, so
the process then reads what it wrote.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from streaming_core.plugin_api import (
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    TruncatedDownloadError,
    carry_environment,
    check_content_range,
    check_options,
    register_secret,
)
from streaming_hf.listings import load_listing, save_listing
from streaming_hf.transport import ConnectionPool
from streaming_hf.url import HfURL, parse_hf_url

__all__ = ['HfBackend', 'OPTIONS', 'PIN_ENV_PREFIX']

#: Every option ``HfBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'endpoint', 'token'})
#: Environment variables ``<prefix><digest>`` carry a pinned commit to child processes.
PIN_ENV_PREFIX = 'STREAMING_HF_PIN_'
carry_environment(PIN_ENV_PREFIX)  # a forkserver's workers inherit its older environment: pins travel with datasets
_COMMIT = re.compile(r'[0-9a-f]{40}\Z')
_MAX_REDIRECTS = 5
_CHUNK = 1 << 20
#: Pins made in this process: ``(endpoint, kind, repo, revision) -> commit`` (forked children inherit it).
_PINS: dict[tuple[str, str, str, str], str] = {}
#: Listings made in this process: ``(endpoint, kind, repo, commit, directory) -> files`` (a commit never changes).
_LISTINGS: dict[tuple[str, str, str, str, str], list[tuple[str, Any, Any]]] = {}
#: The file names of each listing in ``_LISTINGS`` (built on first use), to answer "is it there?" without a request;
#: ``None`` where no listing was known when asked (not looked for on disk again until this process lists it).
_LISTED_NAMES: dict[tuple[str, str, str, str, str], frozenset[str] | None] = {}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Let redirects through as responses: they are followed by hand (to drop the token on another host)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_REDIRECTS = (301, 302, 303, 307, 308)
#: ``huggingface_hub.get_token()``'s answer, looked up once per process (``False``: not yet).
_SAVED_TOKEN: list[str | None | bool] = [False]
os.register_at_fork(after_in_child=lambda: _SAVED_TOKEN.__setitem__(0, False))


def _truthy(value: str | None) -> bool:
    return (value or '').strip().lower() in ('1', 'true', 'yes', 'on')


def _clean_token(value: Any) -> str | None:
    """A token without surrounding whitespace or line breaks (as huggingface_hub reads it); ``None`` when empty."""
    if not isinstance(value, str):
        return None
    return value.replace('\r', '').replace('\n', '').strip() or None


def _saved_token() -> str | None:
    """``huggingface_hub.get_token()`` (the login token file, ``HF_TOKEN_PATH``...), once per process."""
    if _SAVED_TOKEN[0] is False:
        try:
            from huggingface_hub import get_token
            _SAVED_TOKEN[0] = _clean_token(get_token())
        except Exception:  # huggingface_hub missing or an unreadable token file: no token
            _SAVED_TOKEN[0] = None
    found = _SAVED_TOKEN[0]
    return found if isinstance(found, str) else None


class HfBackend(ProcessLocal):
    """``hf://`` storage (see the module docstring).

    Args:
        endpoint: The Hub's URL (default: ``$HF_ENDPOINT``, else ``https://huggingface.co``).
        token: A Hugging Face token (default: ``$HF_TOKEN``, else ``huggingface_hub.get_token()``: the login file...;
            ``False``: send none).
    """

    def __init__(self, **options: Any) -> None:
        check_options('hf', options, OPTIONS)
        endpoint = options.get('endpoint') or os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'
        self.endpoint = str(endpoint).rstrip('/')
        self._token = options.get('token')
        self._init_runtime()

    _process_local = ('_pool', '_secrets', '_opener')

    def _init_runtime(self) -> None:
        super()._init_runtime()
        self._pool = ConnectionPool()
        self._secrets: set[str] = set()
        self._opener: Any = None

    def __repr__(self) -> str:
        return f'HfBackend(endpoint={self.endpoint!r})'

    # Configuration.
    def _token_value(self) -> str | None:
        """The token to send: the option, else ``$HF_TOKEN`` (no import), else huggingface_hub's configuration;
        none of the implicit ones under ``HF_HUB_DISABLE_IMPLICIT_TOKEN``."""
        if self._token is False:  # as huggingface_hub's token=False: send none
            return None
        token = _clean_token(self._token)
        if token is None and not _truthy(os.environ.get('HF_HUB_DISABLE_IMPLICIT_TOKEN')):
            token = _clean_token(os.environ.get('HF_TOKEN')) or _saved_token()
        if token and token not in self._secrets:
            register_secret(token)
            self._secrets.add(token)
        return token

    def _token_advice(self) -> str:
        """The end of a 401's message: which token was (not) sent, and how to give one."""
        if self._token_value():
            return ('the token given was refused. Check the name, and use a token with access (storage_options='
                    '{"token": ...}, HF_TOKEN or huggingface-cli login).')
        if self._token is False:
            return ('no token was given (the token option is False). Check the name, and give a token with access '
                    'in storage_options={"token": ...}.')
        if _truthy(os.environ.get('HF_HUB_DISABLE_IMPLICIT_TOKEN')):
            return ('no token was given: HF_HUB_DISABLE_IMPLICIT_TOKEN is set, so neither HF_TOKEN nor the saved '
                    'login token is sent. Check the name, and pass the token in storage_options={"token": ...} (or '
                    'unset HF_HUB_DISABLE_IMPLICIT_TOKEN).')
        return ('no token was given (HF_TOKEN). Check the name, and set HF_TOKEN (or huggingface-cli login, or '
                'storage_options={"token": ...}) to a token with access.')

    def _check_online(self, url: str) -> None:
        if _truthy(os.environ.get('HF_HUB_OFFLINE')):
            raise PermanentStorageError(f'{url}: HF_HUB_OFFLINE is set, so the Hugging Face Hub ({self.endpoint}) '
                                        f'is not contacted. Unset HF_HUB_OFFLINE, or read a local copy of the '
                                        f'files (local=... without remote=).')

    # HTTP.
    def _request(self, url: str, target: str, method: str, timeout: float,
                 headers: dict[str, str] | None = None) -> Any:
        """Open ``target`` (a Hub URL), following redirects; the token goes to the Hub's host only."""
        self._check_online(url)
        self._check_process()
        hub = urlsplit(self.endpoint).netloc
        token = self._token_value()
        for _ in range(_MAX_REDIRECTS + 1):
            sent = {'User-Agent': 'streaming-hf', **(headers or {})}
            if token and urlsplit(target).netloc == hub:
                sent['Authorization'] = f'Bearer {token}'
            try:
                response = self._send(method, target, sent, timeout)
            except (urllib.error.URLError, OSError, http.client.HTTPException) as err:
                reason = getattr(err, 'reason', err)
                raise StorageError(f'{method} {url}: cannot reach the Hugging Face Hub at {self.endpoint} '
                                   f'({type(reason).__name__}: {reason}). Check the network and HF_ENDPOINT, or '
                                   f'set HF_HUB_OFFLINE=1 and read a local copy.') from None
            status = response.status
            if status in _REDIRECTS and response.headers.get('Location'):
                target = urljoin(target, response.headers['Location'])
                response.close()
                continue
            if status >= 400:
                raise self._http_error(response, url, method) from None
            return response
        raise PermanentStorageError(f'{method} {url}: more than {_MAX_REDIRECTS} redirects.')

    def _send(self, method: str, target: str, headers: dict[str, str], timeout: float) -> Any:
        """One request, no redirect followed: a response of any status (``status``, ``headers``, ``read``,
        ``close``), over a kept-alive connection unless a proxy applies to the host."""
        if not self._pool.proxied(target):
            return self._pool.request(method, target, headers, timeout)
        if self._opener is None:  # its ProxyHandler reads the proxy settings now
            self._opener = urllib.request.build_opener(_NoRedirect)
        try:
            return self._opener.open(urllib.request.Request(target, method=method, headers=headers), timeout=timeout)
        except urllib.error.HTTPError as err:  # a response too
            return err

    def _http_error(self, err: Any, url: str, method: str) -> StorageError:
        """The error for a response of status >= 400 (closed here)."""
        code = err.headers.get('X-Error-Code') or ''
        message = (err.headers.get('X-Error-Message') or '').strip()
        try:
            err.close()
        except Exception:
            pass
        status = err.status
        detail = f' ({code}{": " + message if message else ""})' if code or message else ''
        if status == 401:
            return PermanentStorageError(f'{method} {url}: 401 Unauthorized{detail}: the repository does not '
                                         f'exist, or it is private or gated and {self._token_advice()}')
        if status == 403:
            return PermanentStorageError(
                f'{method} {url}: 403 Forbidden{detail}: the token has no access to this repository. For a gated '
                f'dataset, accept its conditions on its Hub page with this account; otherwise use a token with read '
                f'access.')
        if status == 404 and code == 'RevisionNotFound':
            return RemoteNotFoundError(
                f'{method} {url}: not found on the Hub{detail}: the @revision of the URL names no branch, tag or '
                f'commit of the repository. Check it, or, to write to a new branch, create it first '
                f'(HfApi().create_branch(repo_id, branch=..., repo_type=...)).')
        if status == 404:
            return RemoteNotFoundError(f'{method} {url}: not found on the Hub{detail}.')
        if status == 416:
            return PermanentStorageError(f'{method} {url}: 416 Range Not Satisfiable.')
        kind = PermanentStorageError if 400 <= status < 500 and status not in (408, 429) else StorageError
        return kind(f'{method} {url}: HTTP {status} {err.reason}{detail}.')

    def _json(self, url: str, target: str, timeout: float) -> tuple[Any, Any]:
        response = self._request(url, target, 'GET', timeout)
        try:
            body = _read(response, url, 'GET')
            links = response.headers.get('Link')
        finally:
            response.close()
        try:
            return json.loads(body), links
        except ValueError:
            raise StorageError(f'GET {url}: the Hub answered with something that is not JSON.') from None

    # Revisions.
    def commit_of(self, where: HfURL, url: str, timeout: float) -> str:
        """The commit ``where``'s revision names (resolved once per process, shared with child processes)."""
        revision = where.revision or 'main'
        if _COMMIT.match(revision):
            return revision
        key = (self.endpoint, where.kind, where.repo, revision)
        pinned = _PINS.get(key)
        env = PIN_ENV_PREFIX + hashlib.blake2s('\0'.join(key).encode(), digest_size=10).hexdigest()
        if pinned is None:
            pinned = os.environ.get(env) if _COMMIT.match(os.environ.get(env, '')) else None
        if pinned is None:
            target = f'{self.endpoint}/api/{where.kind}/{where.repo}/revision/{where.quoted_revision()}'
            info, _ = self._json(url, target, timeout)
            pinned = info.get('sha') if isinstance(info, dict) else None
            if not isinstance(pinned, str) or not _COMMIT.match(pinned):
                raise StorageError(f'{url}: the Hub did not resolve revision {revision!r} to a commit.')
        _PINS[key] = pinned
        if os.environ.get(env) != pinned:  # setting it on every request would cost a putenv each
            os.environ[env] = pinned
        return pinned

    def pinned_url(self, url: str, *, timeout: float = 60.0) -> str:
        """``url`` with its revision replaced by the commit it names in this process (a stream reads its files at the
        commit of its index, wherever it is unpickled: a process may have pinned the branch to another commit)."""
        where = parse_hf_url(url)
        if where.revision and _COMMIT.match(where.revision):
            return url
        commit = self.commit_of(where, url, timeout)
        root = f'hf://{where.kind}/{where.repo}@{commit}'
        return f'{root}/{where.path}' if where.path else root

    def _resolve_url(self, where: HfURL, url: str, timeout: float) -> str:
        if not where.path:
            raise PermanentStorageError(f'{url}: names a repository, not a file in it.')
        prefix = '' if where.kind == 'models' else 'datasets/'
        self._check_online(url)  # before anything this process knows: offline, every access fails alike
        commit = self.commit_of(where, url, timeout)
        if self._listed_absent(where, commit):
            raise RemoteNotFoundError(f'{url}: not found on the Hub (not in the listing of commit {commit}).')
        return f'{self.endpoint}/{prefix}{where.repo}/resolve/{commit}/{quote(where.path)}'

    def _listed_absent(self, where: HfURL, commit: str) -> bool:
        """Whether a listing of the file's directory at ``commit`` (this process's, or the node's copy) lacks it: a
        commit never changes, so the file is not there and no request is needed (a warm start looks for
        ``index.json`` beside Parquet files this way). ``False`` when no such listing is known."""
        directory = where.path.rsplit('/', 1)[0] if '/' in where.path else ''
        key = (self.endpoint, where.kind, where.repo, commit, directory)
        if key not in _LISTED_NAMES:  # once per directory and process, not once per file read
            files = _LISTINGS.get(key)
            if files is None:
                files = load_listing((*key, self._who()))
                if files is not None:
                    _LISTINGS[key] = files
            _LISTED_NAMES[key] = frozenset(name for name, _, _ in files) if files is not None else None
        names = _LISTED_NAMES[key]
        return names is not None and where.path not in names

    def _who(self) -> str:
        """Whose listings a node-wide copy may hold for this process: a short digest of the token, or
        ``anonymous``."""
        token = self._token_value()
        return hashlib.blake2s(token.encode(), digest_size=8).hexdigest() if token else 'anonymous'

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Stream the file at ``url`` (pinned commit) into ``path``. A body shorter than its ``Content-Length`` (the
        connection closed early) is a retryable :class:`TruncatedDownloadError`, and ``path`` is removed."""
        where = parse_hf_url(url)
        response = self._request(url, self._resolve_url(where, url, timeout), 'GET', timeout)
        declared = response.headers.get('Content-Length')
        written = 0
        try:
            with open(path, 'wb') as out:
                while True:
                    try:
                        chunk = response.read(_CHUNK)
                    except (OSError, http.client.HTTPException) as err:
                        raise StorageError(f'GET {url}: the download broke off after {written} bytes '
                                           f'({type(err).__name__}: {err}).') from None
                    if not chunk:
                        break
                    out.write(chunk)
                    written += len(chunk)
            if declared is not None and declared.strip().isdigit() and int(declared) != written:
                raise TruncatedDownloadError(f'GET {url}: the download ended after {written} of {declared} bytes.')
        except BaseException:
            try:
                os.remove(path)  # never leave a partial file under the name asked for
            except OSError:
                pass
            raise
        finally:
            response.close()

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """``length`` bytes from ``start`` (one ranged GET; ``b''`` past the end). A partial answer for another
        range than the one asked (its ``Content-Range``) is a retryable :class:`StorageError`."""
        if length <= 0:
            return b''
        where = parse_hf_url(url)
        target = self._resolve_url(where, url, timeout)
        try:
            response = self._request(url, target, 'GET', timeout,
                                     headers={'Range': f'bytes={start}-{start + length - 1}'})
        except PermanentStorageError as err:
            if '416 Range Not Satisfiable' in str(err):
                return b''
            raise
        try:
            data = _read(response, url, 'GET')
            if response.status != 206:  # the whole file: keep what the range covers
                return data[start:start + length]
            check_content_range(response.headers.get('Content-Range'), start, start + length - 1, len(data),
                                f'GET {url}')
        finally:
            response.close()
        return data

    def exists(self, url: str, *, timeout: float) -> bool:
        """HEAD the file: ``True`` if present, ``False`` if not."""
        where = parse_hf_url(url)
        try:
            self._request(url, self._resolve_url(where, url, timeout), 'HEAD', timeout).close()
        except RemoteNotFoundError:
            return False
        return True

    def upload(self, path: str, url: str, *, timeout: float) -> None:
        """Commit the local file ``path`` to ``url``'s path on its branch (:mod:`streaming_hf.upload`)."""
        from streaming_hf.upload import upload
        upload(self, path, url, timeout=timeout)

    def forget_pin(self, where: HfURL) -> None:
        """Drop this process's pin of ``where``'s branch (after a commit to it): the next access resolves it again."""
        key = (self.endpoint, where.kind, where.repo, where.revision or 'main')
        _PINS.pop(key, None)
        os.environ.pop(PIN_ENV_PREFIX + hashlib.blake2s('\0'.join(key).encode(), digest_size=10).hexdigest(), None)

    def stat(self, url: str, *, timeout: float) -> dict[str, Any]:
        """``{'etag', 'size'}`` of the file at the commit its revision names, from the node's listing of its
        directory at that commit (listed once per node; no request when it is kept).

        The etag is a digest of the files of that directory (paths, sizes, blob ids), so it changes when the file
        or a file beside it changes, and not otherwise: a dataset pushed again with an identical ``index.json``
        but other shards is a new version (its cached shards are stale), a commit elsewhere in the repository is not,
        nor one that only edits the directory's own ``*.md`` files or hidden files (``README.md``, ``.gitattributes``
        of a dataset at the repository's root). A URL naming a commit names one version: its etag is the commit,
        and nothing is listed.

        Raises:
            RemoteNotFoundError: the file is not in the commit.
        """
        where = parse_hf_url(url)
        if not where.path:
            raise PermanentStorageError(f'{url}: names a repository, not a file in it.')
        if where.revision and _COMMIT.match(where.revision):
            return {'etag': f'commit:{where.revision}', 'size': None, 'mtime': None}
        directory = where.path.rsplit('/', 1)[0] + '/' if '/' in where.path else ''
        rows = self.list_stats(where.with_path(directory), timeout=timeout)
        mine = [info for item, info in rows if item == url]
        if not mine:
            commit = self.commit_of(where, url, timeout)
            raise RemoteNotFoundError(f'{url}: not found on the Hub (not in the listing of commit {commit}).')
        digest = hashlib.blake2b(digest_size=16)
        start = len(where.with_path(directory)) if directory else len(where.root) + 1
        for item, info in rows:
            name = item[start:]  # relative to the directory: the same whichever way the URL names the revision
            if '/' not in name and (name.startswith('.') or name.endswith('.md')):
                continue
            digest.update(f'{name}\0{info.get("size")}\0{info.get("etag")}\n'.encode('utf-8', 'surrogatepass'))
        return {'etag': f'dir:{digest.hexdigest()}', 'size': mine[0].get('size'), 'mtime': None}

    def list(self, url: str, *, timeout: float) -> list[str]:
        """The URLs of the files whose URL starts with ``url``, sorted."""
        return [item for item, _ in self.list_stats(url, timeout=timeout)]

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every file under the prefix with its size and etag (the tree API, recursive, every page)."""
        where = parse_hf_url(url)
        self._check_online(url)
        text = url[len(where.root):].lstrip('/')  # the prefix inside the repository, as written
        directory = text.rsplit('/', 1)[0] if '/' in text else ''
        commit = self.commit_of(where, url, timeout)
        key = (self.endpoint, where.kind, where.repo, commit, directory)
        files = _LISTINGS.get(key)
        if files is None:
            shared = (*key, self._who())  # a process with another token (or none) lists for itself: access checked
            files = load_listing(shared)  # another process of the node listed this commit already
            if files is None:
                files = self._tree(where, url, commit, directory, timeout)
                save_listing(shared, files)
            _LISTINGS[key] = files
            _LISTED_NAMES.pop(key, None)  # 'no listing known' no longer holds
        found = [(where.with_path(name), {'size': size, 'etag': etag, 'mtime': None})
                 for name, size, etag in files if name.startswith(text)]
        return sorted(found)

    def _tree(self, where: HfURL, url: str, commit: str, directory: str,
              timeout: float) -> list[tuple[str, Any, Any]]:
        """``(path, size, etag)`` of every file under ``directory`` at ``commit`` (every page of the tree API)."""
        target: str | None = (f'{self.endpoint}/api/{where.kind}/{where.repo}/tree/{commit}/{quote(directory)}'
                              f'?recursive=true&expand=false').replace(f'{commit}/?', f'{commit}?')
        files = []
        pages = 0
        while target is not None:
            try:
                entries, links = self._json(url, target, timeout)
            except RemoteNotFoundError as err:
                if pages == 0 and 'EntryNotFound' in str(err):
                    return []  # no such directory: nothing under the prefix
                raise
            if not isinstance(entries, list):
                raise StorageError(f'GET {url}: the Hub\'s tree listing is not a list.')
            for entry in entries:
                if not isinstance(entry, dict) or entry.get('type') != 'file':
                    continue
                lfs = entry.get('lfs') if isinstance(entry.get('lfs'), dict) else {}
                files.append((str(entry.get('path', '')), entry.get('size'), lfs.get('oid') or entry.get('oid')))
            pages += 1
            target = _next_link(links, target)
        return files


def _read(response: Any, url: str, method: str) -> bytes:
    """The whole body of ``response``; a connection broken off mid-body is a (retried) :class:`StorageError`."""
    try:
        return response.read()
    except (OSError, http.client.HTTPException) as err:
        raise StorageError(f'{method} {url}: the answer broke off ({type(err).__name__}: {err}).') from None


def _next_link(header: str | None, current: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (resolved against the current URL), if any."""
    if not header:
        return None
    for part in header.split(','):
        match = re.match(r'\s*<([^>]*)>\s*;(.*)', part)
        if match and re.search(r'rel="?next"?', match.group(2)):
            return urljoin(current, match.group(1))
    return None
