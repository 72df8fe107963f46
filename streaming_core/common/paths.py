"""Where streaming-core keeps node-local files: the default cache root, per-dataset directories and state.

Everything streaming-core keeps *about* a local directory (its lock file, the record of which remote and which
index version it holds) lives in that directory's state directory, ``<cache root>/state/<digest of its real
path>/`` (:func:`state_dir`), never inside the directory itself: a local directory mirrors its remote exactly and
may be read-only.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ['CACHE_ENV', 'cache_root', 'default_local', 'without_credentials', 'is_within', 'coordination_dir',
           'state_dir', 'state_key', 'state_root', 'COORD_NAME', 'LOCK_NAME', 'STATE_DIR_NAME']

#: Environment variable that overrides the cache root.
CACHE_ENV = 'STREAMING_CORE_CACHE_DIR'
#: Name of the hidden lock file earlier versions kept inside a local directory (no longer created; ignored and
#: never counted as data where local files are listed).
COORD_NAME = '.streaming-core.lock'
#: Name of a local directory's lock file inside its state directory.
LOCK_NAME = 'stream.lock'
#: The subdirectory of the cache root holding the state directories.
STATE_DIR_NAME = 'state'


def cache_root() -> str:
    """The cache root: ``$STREAMING_CORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/streaming-core``, else
    ``~/.cache/streaming-core``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'streaming-core')


#: Schemes whose ``user@`` is a login, never part of the location (``sftp://alice@host/x`` names ``/x`` on ``host``).
LOGIN_SCHEMES = frozenset({'http', 'https', 'ftp', 'ftps', 'sftp', 'ssh'})


def without_credentials(remote: str) -> str:
    """``remote`` without the login of its address: a ``user:password@`` of any scheme, and a bare ``user@`` of
    the schemes whose userinfo is a login (:data:`LOGIN_SCHEMES`). An ``@`` that is part of the location stays
    (``azure-dl://filesystem@account/...``, ``oci://bucket@namespace/...``). A login rotated, added, dropped or
    moved into ``storage_options`` thus leaves the same remote."""
    scheme, sep, rest = remote.partition('://')
    if not sep:
        return remote
    end = min((i for i in (rest.find('/'), rest.find('?'), rest.find('#')) if i >= 0), default=len(rest))
    host, tail = rest[:end], rest[end:]
    login, at, address = host.rpartition('@')
    if at and (':' in login or scheme.lower() in LOGIN_SCHEMES):
        host = address
    return f'{scheme}://{host}{tail}'


def default_local(remote: str) -> str:
    """The default local directory of a remote: ``<cache root>/datasets/<hash of the remote URL>``.

    Any number of jobs may share it: downloads are atomic and coordinated by kernel-released locks. A path remote
    is named by the directory it resolves to (so ``ds`` from two working directories, or a ``latest`` link moved to
    another version, are two caches); a ``file://`` URL names the same directory as its path; a login in a URL
    (``https://user:password@host/...``) is not part of the name (:func:`without_credentials`), so a rotated
    password keeps the cache.
    """
    if remote.startswith('file:'):  # as storage.facade.local_path reads it (common/ imports no other wing)
        from urllib.parse import unquote, urlparse
        remote = unquote(urlparse(remote).path)
    if '://' not in remote and not remote.lower().startswith('dbfs:/'):  # a path (see storage.url.url_scheme): the
        # directory it resolves to (a relative path, a symbolic link moved)
        path = _dataset_dir(os.path.realpath(os.path.abspath(os.path.expanduser(remote))))
        earlier = _dataset_dir(remote)  # where earlier versions put an absolute path: as written
        if os.path.isabs(remote) and earlier != path and not os.path.exists(path) and os.path.isdir(earlier):
            return earlier
        return path
    path = _dataset_dir(without_credentials(remote))
    earlier = _dataset_dir(_without_password(remote))  # where versions before 0.2 put a URL with a login
    if earlier != path and not os.path.exists(path) and os.path.isdir(earlier):
        return earlier  # keep using it: no second copy of the dataset
    return path


def _dataset_dir(remote: str) -> str:
    return os.path.join(cache_root(), 'datasets', hashlib.blake2s(remote.encode('utf-8'), digest_size=16).hexdigest())


def _without_password(remote: str) -> str:
    """``remote`` with the password of ``user:password@`` dropped and the user kept (the earlier default-local rule)."""
    if '://' in remote and ':' in remote.split('://', 1)[1].split('/', 1)[0].rpartition('@')[0]:
        scheme, rest = remote.split('://', 1)
        host, slash, path = rest.partition('/')
        user, _, address = host.rpartition('@')
        return f'{scheme}://{user.split(":", 1)[0]}@{address}{slash}{path}'
    return remote


def same_place(one: str, other: str) -> bool:
    """Whether two local paths name one directory (or file): the same real path, or, through a bind mount or another
    mount of one filesystem, the same device and inode. A path that does not exist yet is compared by its nearest
    existing parent and the names below it."""
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    (first, below), (second, also_below) = _existing_part(one), _existing_part(other)
    try:
        return below == also_below and os.path.samefile(first, second)
    except OSError:
        return False


def is_within(path: str, directory: str) -> bool:
    """Whether ``path`` is ``directory`` or below it, by their real paths (symlinks resolved)."""
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _existing_part(path: str) -> tuple[str, list[str]]:
    """``(nearest existing ancestor of path, the names below it)``."""
    path, below = os.path.abspath(path), []
    while not os.path.exists(path):
        parent, name = os.path.split(path)
        if parent == path:
            break
        path = parent
        below.insert(0, name)
    return path, below


def coordination_dir(*parts: str) -> str:
    """A directory under the cache root for node-local coordination files (plans, cache state)."""
    path = os.path.join(cache_root(), *parts)
    os.makedirs(path, exist_ok=True)
    return path


def state_root() -> str:
    """``<cache root>/state``: the parent of every state directory (not created)."""
    return os.path.join(cache_root(), STATE_DIR_NAME)


def state_key(local_dir: str) -> str:
    """The digest naming the state directory of ``local_dir`` (from its real path, so every spelling of one
    directory, through symlinks or relative paths, shares one state directory)."""
    real = os.path.realpath(os.path.abspath(os.path.expanduser(local_dir)))
    return hashlib.blake2s(real.encode('utf-8'), digest_size=16).hexdigest()


def state_dir(local_dir: str, create: bool = True) -> str:
    """The state directory of a local directory: ``<cache root>/state/<digest of its real path>/``.

    It holds what streaming-core keeps about the directory: its lock file (:data:`LOCK_NAME`) and the record of the
    remote and index version it holds (see :mod:`streaming_core.reading.cache_record`).

    Args:
        local_dir: The local directory (a stream's split directory, the one holding ``index.json``).
        create: Create the state directory when it does not exist.
    """
    path = os.path.join(state_root(), state_key(local_dir))
    if create:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:  # the same type, saying what to do
            raise type(err)(err.errno, f'{err.strerror}: cannot create the state directory of {local_dir}. The cache '
                                       f'root {cache_root()} must be writable: set {CACHE_ENV} to a writable '
                                       f'directory', path) from err
    return path
