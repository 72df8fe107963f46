"""Where streaming-core keeps node-local files: the default cache root and per-dataset directories."""

from __future__ import annotations

import hashlib
import os

__all__ = ['CACHE_ENV', 'cache_root', 'default_local', 'coordination_dir', 'COORD_NAME']

#: Environment variable that overrides the cache root.
CACHE_ENV = 'STREAMING_CORE_CACHE_DIR'
#: Name of the hidden per-stream lock file kept next to downloaded shards.
COORD_NAME = '.streaming-core.lock'


def cache_root() -> str:
    """The cache root: ``$STREAMING_CORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/streaming-core``, else
    ``~/.cache/streaming-core``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return os.path.abspath(os.path.expanduser(explicit))
    base = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
    return os.path.join(base, 'streaming-core')


def default_local(remote: str) -> str:
    """The default local directory of a remote: ``<cache root>/datasets/<hash of the remote URL>``.

    Any number of jobs may share it: downloads are atomic and coordinated by kernel-released locks.
    """
    digest = hashlib.blake2s(remote.encode('utf-8'), digest_size=16).hexdigest()
    return os.path.join(cache_root(), 'datasets', digest)


def coordination_dir(*parts: str) -> str:
    """A directory under the cache root for node-local coordination files (plans, cache state)."""
    path = os.path.join(cache_root(), *parts)
    os.makedirs(path, exist_ok=True)
    return path
