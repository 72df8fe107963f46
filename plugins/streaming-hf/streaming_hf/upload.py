"""Uploads to ``hf://``: one local file becomes one commit on a branch of a Hub repository.

``hf://{datasets|models}/{owner}/{name}[@{branch}]/{path}`` is written with ``huggingface_hub``'s own client
(``HfApi(endpoint=..., token=...)``), so the Hub's real protocol is used:

1. ``POST /api/{datasets|models}/{repo}/preupload/{branch}``: the Hub says whether the file goes in git (``regular``)
   or through LFS, and which file is already at that path;
2. for an LFS file, ``POST /{datasets/}{repo}.git/info/lfs/objects/batch``, the ``PUT`` it returns (to the Hub's
   storage, without the token) and the ``verify`` if it asks for one;
3. ``POST /api/{datasets|models}/{repo}/commit/{branch}`` (NDJSON), made under a lock per repository and branch, so
   the commits of one process never race each other (their LFS uploads still run in parallel).

Files go through the plain HTTP LFS protocol, never Xet (``huggingface_hub`` 2.4 chooses Xet on the client side
whenever ``hf_xet`` is installed, whatever the server offers; it falls back to LFS for a file object, so the file is
passed open). A file whose content is already at that path makes no commit, so a retried upload never fails or
duplicates. After a commit, this process's pin of the branch is dropped (the next read resolves the branch again,
so the process reads what it wrote); readers that pinned an earlier commit, in other processes, keep reading it.

Errors: a commit id or a tag as the revision, a missing repository or branch, a missing or refused token (401) or
a token without write access (403) raise a :class:`PermanentStorageError` saying what to do; rate limits, server
errors and broken connections raise :class:`StorageError` (retried by the core). The token never appears in them.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from streaming_core.plugin_api import PermanentStorageError, StorageError
from streaming_hf.url import HfURL, parse_hf_url

if TYPE_CHECKING:
    from streaming_hf.backend import HfBackend

__all__ = ['upload']

#: One lock per ``(endpoint, kind, repo, branch)``: commits of this process go one after another.
_COMMIT_LOCKS: dict[tuple[str, str, str, str], threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _after_fork() -> None:
    """A forked child starts with fresh locks (one held by another thread at the fork would never be released)."""
    global _LOCKS_LOCK
    _LOCKS_LOCK = threading.Lock()
    _COMMIT_LOCKS.clear()


os.register_at_fork(after_in_child=_after_fork)
#: huggingface_hub's warnings about what this module does on purpose: a file object sent over HTTP rather than Xet,
#: and an upload of a file already there (a retry) making no commit.
_EXPECTED = ('not supported by Xet Storage', 'Skipping to prevent empty commit')


class _ExpectedNotice(logging.Filter):
    """Drop huggingface_hub's warnings about what this module does on purpose (:data:`_EXPECTED`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text in message for text in _EXPECTED)


def _commit_lock(key: tuple[str, str, str, str]) -> threading.Lock:
    with _LOCKS_LOCK:
        return _COMMIT_LOCKS.setdefault(key, threading.Lock())


def upload(backend: HfBackend, path: str, url: str, *, timeout: float) -> None:
    """Commit the local file ``path`` to ``url`` (see the module docstring).

    ``timeout`` is not applied per request: ``huggingface_hub``'s own timeouts and retries (on 429 and 5xx) apply.
    """
    where = parse_hf_url(url)
    branch = _branch(where, url)
    backend._check_online(url)
    backend._check_process()
    try:
        from huggingface_hub import CommitOperationAdd, HfApi
    except ImportError:
        raise PermanentStorageError(f'Uploading to {url} needs huggingface_hub: pip install huggingface_hub.') from None
    for name in ('huggingface_hub._commit_api', 'huggingface_hub.hf_api'):
        logging.getLogger(name).addFilter(_QUIET)  # once: a logger keeps one copy of a filter
    token = backend._token_value()
    api = HfApi(endpoint=backend.endpoint, token=token or False, library_name='streaming-hf')
    key = (backend.endpoint, where.kind, where.repo, branch)
    try:
        with open(path, 'rb') as handle:
            addition = CommitOperationAdd(path_in_repo=where.path, path_or_fileobj=handle)
            api.preupload_lfs_files(where.repo, [addition], repo_type=where.repo_type, revision=branch)
            with _commit_lock(key):
                api.create_commit(where.repo, [addition], repo_type=where.repo_type, revision=branch,
                                  commit_message=f'Upload {where.path} with streaming-hf')
                backend.forget_pin(where)
    except (PermanentStorageError, StorageError):
        raise
    except OSError as err:
        if getattr(err, 'filename', None) == path:
            raise  # our side: the local file
        raise _error(err, backend, where, url, branch, token) from None
    except Exception as err:
        raise _error(err, backend, where, url, branch, token) from None


_QUIET = _ExpectedNotice()


def _branch(where: HfURL, url: str) -> str:
    """The branch ``url`` writes to; a commit id or an empty path is refused before any request."""
    if not where.path:
        raise PermanentStorageError(f'Uploading to {url}: the URL names a repository, not a file in it.')
    branch = where.revision or 'main'
    if len(branch) == 40 and all(c in '0123456789abcdef' for c in branch):
        raise PermanentStorageError(
            f'Uploading to {url}: the revision {branch} is a commit, and a commit cannot change. Upload to a branch: '
            f'{where.kind}/{where.repo}@<branch>/... (or no @revision for main).')
    return branch


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, '***') if token else text


def _error(err: BaseException, backend: HfBackend, where: HfURL, url: str, branch: str,
           token: str | None) -> StorageError:
    """Our error for a failure of ``huggingface_hub`` (its message with the token masked)."""
    response = getattr(err, 'response', None)
    status = getattr(response, 'status_code', None)
    headers = getattr(response, 'headers', None) or {}
    code = headers.get('X-Error-Code') or ''
    message = _scrub((headers.get('X-Error-Message') or '').strip(), token)
    detail = f' ({code}{": " + message if message else ""})' if code or message else ''
    shown = f'Uploading to {url}'
    hub = f'{where.kind}/{where.repo}'
    if status == 401:
        return PermanentStorageError(f'{shown}: 401 Unauthorized{detail}: the repository does not exist, or '
                                     f'{backend._token_advice()} Writing needs a token with write access.')
    if status == 403:
        return PermanentStorageError(
            f'{shown}: 403 Forbidden{detail}: the token has no write access to {hub}. Use a token with write '
            f'permission on it (a "write" or fine-grained token: storage_options={{"token": ...}} or HF_TOKEN), '
            f'or write to a repository of your own.')
    if status == 404 and code == 'RevisionNotFound':
        return PermanentStorageError(
            f'{shown}: {branch!r} is not a branch of {hub}{detail}: commits go to branches, not to tags or missing '
            f'revisions. Write to an existing branch (hf://{hub}@<branch>/..., or no @ for main), or create one '
            f'first (HfApi().create_branch({where.repo!r}, branch=..., repo_type={where.repo_type!r})).')
    if status == 404:
        return PermanentStorageError(
            f'{shown}: 404 Not Found{detail}: no repository {hub} on {backend.endpoint}. Create it first '
            f'(HfApi().create_repo({where.repo!r}, repo_type={where.repo_type!r})).')
    if status is not None:
        kind = PermanentStorageError if 400 <= status < 500 and status not in (408, 409, 412, 429) else StorageError
        return kind(f'{shown}: HTTP {status}{detail}.')
    text = _scrub(f'{type(err).__name__}: {err}', token)
    if isinstance(err, (ConnectionError, TimeoutError)) or type(err).__module__.startswith(('httpx', 'httpcore')):
        return StorageError(f'{shown}: cannot reach the Hugging Face Hub at {backend.endpoint} ({text}). Check the '
                            f'network and HF_ENDPOINT.')
    if isinstance(err, ValueError):
        return PermanentStorageError(f'{shown}: {text}.')
    return StorageError(f'{shown}: {text}.')

