"""The ``hf://`` storage backend: a Hugging Face Hub repository over the Hub's HTTP API.

Requests (the paths ``huggingface_hub`` uses, against ``HF_ENDPOINT``, default ``https://huggingface.co``):

* ``GET /api/{datasets|models}/{repo}/revision/{revision}``: a branch or tag resolved to its commit, once per
  process and revision (a commit id is used as it is). Every later request names the commit, so a push during
  training cannot mix two versions. The commit is also put in the environment, so processes started from this one
  (spawned DataLoader workers) use the same commit.
* ``GET /api/{datasets|models}/{repo}/tree/{commit}/{path}?recursive=true``: the listing, following the ``Link:
  <...>; rel="next"`` pages; sizes, and as etags the file's LFS sha256 (or its git blob id). A commit's tree never
  changes, so it is listed once per process (forked children inherit the listing).
* ``GET/HEAD /{datasets/}{repo}/resolve/{commit}/{path}``: downloads, existence checks and ranged reads (``Range:
  bytes=a-b``). Redirects (the Hub sends LFS files to its CDN) are followed, and the token is sent to the Hub's own
  host only, never to another host.

The token comes from the ``token`` storage option, else ``huggingface_hub.get_token()`` (``HF_TOKEN``, then the
token file of ``huggingface-cli login``); it is registered as a secret so it is masked in logs, and it never
appears in errors or reprs. ``HF_HUB_OFFLINE=1`` makes every request fail at once with a message saying so. A 401
or 403 (a private or gated repository, a bad token) is a permanent error saying what to do; nothing is uploaded
(the Hub's commit API is not implemented: upload with ``huggingface_hub`` instead).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

from streaming_core.plugin_api import (
    PermanentStorageError,
    ProcessLocal,
    RemoteNotFoundError,
    StorageError,
    check_options,
    register_secret,
)
from streaming_hf.url import HfURL, parse_hf_url

__all__ = ['HfBackend', 'OPTIONS', 'PIN_ENV_PREFIX']

#: Every option ``HfBackend`` accepts (``storage_options`` keys).
OPTIONS = frozenset({'endpoint', 'token'})
#: Environment variables ``<prefix><digest>`` carry a pinned commit to child processes.
PIN_ENV_PREFIX = 'STREAMING_HF_PIN_'
_COMMIT = re.compile(r'[0-9a-f]{40}\Z')
_MAX_REDIRECTS = 5
_CHUNK = 1 << 20
#: Pins made in this process: ``(endpoint, kind, repo, revision) -> commit`` (forked children inherit it).
_PINS: dict[tuple[str, str, str, str], str] = {}
#: Listings made in this process: ``(endpoint, kind, repo, commit, directory) -> files`` (a commit never changes).
_LISTINGS: dict[tuple[str, str, str, str, str], list[tuple[str, Any, Any]]] = {}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Let redirects through as responses: they are followed by hand (to drop the token on another host)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _truthy(value: str | None) -> bool:
    return (value or '').strip().lower() in ('1', 'true', 'yes', 'on')


class HfBackend(ProcessLocal):
    """``hf://`` storage (see the module docstring).

    Args:
        endpoint: The Hub's URL (default: ``$HF_ENDPOINT``, else ``https://huggingface.co``).
        token: A Hugging Face token (default: ``huggingface_hub.get_token()``: ``$HF_TOKEN`` or the login file).
    """

    def __init__(self, **options: Any) -> None:
        check_options('hf', options, OPTIONS)
        endpoint = options.get('endpoint') or os.environ.get('HF_ENDPOINT') or 'https://huggingface.co'
        self.endpoint = str(endpoint).rstrip('/')
        self._token = options.get('token')
        self._init_runtime()

    def _init_runtime(self) -> None:
        super()._init_runtime()

    def __repr__(self) -> str:
        return f'HfBackend(endpoint={self.endpoint!r})'

    # Configuration.
    def _token_value(self) -> str | None:
        token = self._token
        if token is None:
            token = os.environ.get('HF_TOKEN') or None
            if token is None:
                try:
                    from huggingface_hub import get_token
                    token = get_token()
                except Exception:  # an unreadable token file is "no token"
                    token = None
        if token:
            register_secret(token)
        return token or None

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
        hub = urlsplit(self.endpoint).netloc
        token = self._token_value()
        for _ in range(_MAX_REDIRECTS + 1):
            request = urllib.request.Request(target, method=method, headers={
                'User-Agent': 'streaming-hf', **(headers or {})})
            if token and urlsplit(target).netloc == hub:
                request.add_unredirected_header('Authorization', f'Bearer {token}')
            try:
                response = _OPENER.open(request, timeout=timeout)
            except urllib.error.HTTPError as err:
                if err.code in (301, 302, 303, 307, 308) and err.headers.get('Location'):
                    target = urljoin(target, err.headers['Location'])
                    err.close()
                    continue
                raise self._http_error(err, url, method) from None
            except (urllib.error.URLError, OSError) as err:
                reason = getattr(err, 'reason', err)
                raise StorageError(f'{method} {url}: cannot reach the Hugging Face Hub at {self.endpoint} '
                                   f'({type(reason).__name__}: {reason}). Check the network and HF_ENDPOINT, or '
                                   f'set HF_HUB_OFFLINE=1 and read a local copy.') from None
            return response
        raise PermanentStorageError(f'{method} {url}: more than {_MAX_REDIRECTS} redirects.')

    def _http_error(self, err: urllib.error.HTTPError, url: str, method: str) -> StorageError:
        code = err.headers.get('X-Error-Code') or ''
        message = (err.headers.get('X-Error-Message') or '').strip()
        try:
            err.close()
        except Exception:
            pass
        detail = f' ({code}{": " + message if message else ""})' if code or message else ''
        if err.code == 401:
            has = 'the token given was refused' if self._token_value() else 'no token was given (HF_TOKEN)'
            return PermanentStorageError(
                f'{method} {url}: 401 Unauthorized{detail}: the repository does not exist, or it is private or '
                f'gated and {has}. Check the name, and set HF_TOKEN (or huggingface-cli login) to a token with '
                f'access.')
        if err.code == 403:
            return PermanentStorageError(
                f'{method} {url}: 403 Forbidden{detail}: the token has no access to this repository. For a gated '
                f'dataset, accept its conditions on its Hub page with this account; otherwise use a token with read '
                f'access.')
        if err.code == 404:
            return RemoteNotFoundError(f'{method} {url}: not found on the Hub{detail}.')
        if err.code == 416:
            return PermanentStorageError(f'{method} {url}: 416 Range Not Satisfiable.')
        kind = PermanentStorageError if 400 <= err.code < 500 and err.code not in (408, 429) else StorageError
        return kind(f'{method} {url}: HTTP {err.code} {err.reason}{detail}.')

    def _json(self, url: str, target: str, timeout: float) -> tuple[Any, Any]:
        response = self._request(url, target, 'GET', timeout)
        try:
            body = response.read()
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
        os.environ[env] = pinned
        return pinned

    def _resolve_url(self, where: HfURL, url: str, timeout: float) -> str:
        if not where.path:
            raise PermanentStorageError(f'{url}: names a repository, not a file in it.')
        prefix = '' if where.kind == 'models' else 'datasets/'
        commit = self.commit_of(where, url, timeout)
        return f'{self.endpoint}/{prefix}{where.repo}/resolve/{commit}/{quote(where.path)}'

    # The StorageBackend protocol.
    def download(self, url: str, path: str, *, timeout: float) -> None:
        """Stream the file at ``url`` (pinned commit) into ``path``."""
        where = parse_hf_url(url)
        response = self._request(url, self._resolve_url(where, url, timeout), 'GET', timeout)
        try:
            with open(path, 'wb') as out:
                shutil.copyfileobj(response, out, _CHUNK)
        finally:
            response.close()

    def read_range(self, url: str, start: int, length: int, *, timeout: float) -> bytes:
        """``length`` bytes from ``start`` (one ranged GET; ``b''`` past the end)."""
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
            data = response.read() if response.status == 206 else response.read()[start:start + length]
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
        """Not supported: the Hub takes files through commits (``huggingface_hub.HfApi.upload_folder``)."""
        raise PermanentStorageError(f'Uploading to {url} is not supported by streaming-hf: write the dataset locally '
                                    f'(out=a local directory), then upload it with huggingface_hub '
                                    f'(HfApi().upload_folder(repo_id=..., repo_type="dataset", folder_path=...)).')

    def list(self, url: str, *, timeout: float) -> list[str]:
        """The URLs of the files whose URL starts with ``url``, sorted."""
        return [item for item, _ in self.list_stats(url, timeout=timeout)]

    def list_stats(self, url: str, *, timeout: float) -> list[tuple[str, dict[str, Any]]]:
        """Every file under the prefix with its size and etag (the tree API, recursive, every page)."""
        where = parse_hf_url(url)
        text = url[len(where.root):].lstrip('/')  # the prefix inside the repository, as written
        directory = text.rsplit('/', 1)[0] if '/' in text else ''
        commit = self.commit_of(where, url, timeout)
        key = (self.endpoint, where.kind, where.repo, commit, directory)
        files = _LISTINGS.get(key)
        if files is None:
            files = self._tree(where, url, commit, directory, timeout)
            _LISTINGS[key] = files
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


def _next_link(header: str | None, current: str) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header (resolved against the current URL), if any."""
    if not header:
        return None
    for part in header.split(','):
        match = re.match(r'\s*<([^>]*)>\s*;(.*)', part)
        if match and re.search(r'rel="?next"?', match.group(2)):
            return urljoin(current, match.group(1))
    return None
