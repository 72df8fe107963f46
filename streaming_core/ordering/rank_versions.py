"""Every rank of a job reads the same version of a dataset, or the job stops with an error.

Ranks construct their datasets at slightly different times. A dataset rewritten meanwhile (``index.json`` replaced,
a push to an ``hf://`` branch, files added to a Parquet directory) would give them different shard layouts: each
rank's share of the sample order would then be cut from a different list, and samples would be lost or repeated
without a sign. A dataset keeps one index version for its lifetime; this module makes the ranks agree on it.

Each dataset carries a :class:`VersionCheck`: the name of what it reads (its streams' remotes, or local
directories, splits, formats and format options), its ordinal among this process's datasets of that name, and its
version (a digest of every stream's shard names, hashes and sample counts, and of the identity of the remote version
each stream loaded: the same on every machine). In each
rank's main process, as soon as a ``torch.distributed`` process group exists (at construction, or later: before
DataLoader workers fork, when the dataset is pickled for spawned workers, or when iteration starts), the version is
offered to the group's rendezvous store with one ``compare_set``: the first rank's version stays, and a rank that
finds another one raises :class:`DatasetVersionError`. No collective runs and nothing waits, as for the node layout
(:mod:`streaming_core.ordering.world`); a forked DataLoader worker never touches the store, and raises the error its
parent recorded. Without a process group there is no check (a single process, or ranks launched without one).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import re
import weakref
from typing import Any, Sequence

from streaming_core.common.fork_safe import ForkSafeLock
from streaming_core.errors import DatasetVersionError
from streaming_core.ordering.world import _dist, _in_dataloader_worker, _store_key
from streaming_core.storage.redact import redact_url

__all__ = ['VersionCheck', 'content_version', 'remote_identity', 'same_dataset_version']

logger = logging.getLogger('streaming_core.ordering.rank_versions')

_PREFIX = 'streaming_core/dataset_version'
_ordinals: collections.Counter[str] = collections.Counter()
_ordinals_lock = ForkSafeLock()  # a forked child never inherits it held
_pending: 'weakref.WeakSet[VersionCheck]' = weakref.WeakSet()  # checks not yet offered to a store


class VersionCheck:
    """One dataset's version, to be compared with the other ranks' (see the module doc).

    Args:
        names: What the dataset reads, the same on every rank (each stream's remote or local directory, split, class,
            format and format options: a Hugging Face split or config is a format option).
        version: The dataset's version (machine-independent).
        description: The streams, for messages.
    """

    def __init__(self, names: list[str], version: str, description: str) -> None:
        digest = hashlib.blake2b(digest_size=12)
        for name in names:
            digest.update(name.encode('utf-8') + b'\0')
        self.name = digest.hexdigest()
        with _ordinals_lock:
            self.ordinal = _ordinals[self.name]
            _ordinals[self.name] += 1
        self.version = version
        #: The content version alone (:func:`content_version`), when made by :meth:`of_dataset`.
        self.content = version
        self.description = description
        self.hint = '; for hf://, name a commit (hf://datasets/owner/name@<commit>/...)' if 'hf://' in description \
            else ''
        self.error: str | None = None
        self._checked: Any = None  # the store it was compared in (this process)
        _pending.add(self)

    @classmethod
    def of_dataset(cls, streams: Sequence[Any], catalogue: Any) -> 'VersionCheck':
        """The check of a dataset reading ``streams`` (its :class:`~streaming_core.reading.stream.Stream` objects),
        whose shards are ``catalogue``. Its version is :func:`content_version` and, for each stream with a remote,
        the identity of the remote version it loaded (:func:`remote_identity`): a dataset rewritten with the same
        names, sizes and sample counts, without hashes, keeps its content version but not its identity."""
        content = content_version(streams, catalogue)
        remotes = []  # per stream: the kind of its identity and a digest of it ('' without one)
        for index, stream in enumerate(streams):
            identity = remote_identity(stream, hashed=_every_file_hashed(catalogue, index))
            digest = hashlib.blake2b(identity.encode('utf-8'), digest_size=8).hexdigest()
            remotes.append(f'{identity.split(":", 1)[0]}:{digest}' if identity else '')
        names = [f'{s.remote_dir or s.local_dir}\0{s.split or ""}\0{type(s).__name__}\0{s.format or ""}\0'
                 f'{sorted((str(k), repr(v)) for k, v in (s.format_options or {}).items())}' for s in streams]
        where = ', '.join(redact_url(s.remote_dir) if s.remote_dir else s.local_dir for s in streams)
        check = cls(names, f'{content}|{",".join(remotes)}', f'streams: {where}')
        check.content = content
        return check

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state['_checked'] = None  # a spawned rank compares again (its answer is the same)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.error is None:
            _pending.add(self)

    def run(self, raise_error: bool = True) -> None:
        """Compare this dataset's version with the other ranks' (see the module doc); a no-op without a process group,
        in a DataLoader worker (which only raises what its parent found), or once compared.

        Raises:
            DatasetVersionError: another rank of the job read another version of the dataset.
        """
        if self.error is None and not _in_dataloader_worker():
            self._compare()
        if self.error is not None and raise_error:
            raise DatasetVersionError(self.error)

    def _compare(self) -> None:
        dist = _dist()
        found = None if dist is None else _store_key(dist)
        if found is None or self._checked is found[0]:
            return
        store = found[0]
        rank = dist.get_rank()
        key = f'{_PREFIX}/{self.name}/{self.ordinal}'
        offered = f'{self.version} {rank}'
        self._checked = store
        _pending.discard(self)
        try:
            got = store.compare_set(key, '', offered)
        except Exception as err:  # a store without compare_set, or one that fails: no check, never a failure
            logger.warning('Cannot compare the dataset version across ranks (%s): %s: %s', self.description,
                           type(err).__name__, err)
            return
        got = got.decode('utf-8', 'replace') if isinstance(got, bytes) else str(got)
        version, _, first = got.partition(' ')
        if not same_dataset_version(version, self.version):
            same_content = version.partition('|')[0] == self.version.partition('|')[0]
            self.error = (
                f'Rank {rank} reads another version of the dataset than rank {first} of this job ({self.description}): '
                f'its shards, their sample counts or the remote version differ (version {self.version} here, {version} '
                f'there). The dataset '
                f'changed while the ranks started (index.json rewritten, files added or replaced, a push to an hf:// '
                f'branch), and ranks on different versions would lose or repeat samples. Restart the job once the '
                f'dataset no longer changes{getattr(self, "hint", "")}.{_COPIES_HINT if same_content else ""}')
            logger.error('%s', self.error)


_COPIES_HINT = (' The shards, hashes and sample counts are the same on both ranks, only the remote\'s index.json is '
                'another version: if each node reads its own copy of a remote on a path, the copies differ in its '
                'size or modification time; copy them keeping modification times (cp -p, rsync -a).')


def same_dataset_version(there: str, here: str) -> bool:
    """Whether two ranks' versions (``content|kind:digest,...``) name one version: the same content, and for each
    stream the same remote identity where both ranks identified it the same way (one whose stat failed named its
    version by the index bytes, ``sha256:``, which cannot be compared with another's ``stat:``)."""
    content, _, remotes = there.partition('|')
    mine, _, own = here.partition('|')
    if content != mine:
        return False
    theirs, ours = remotes.split(','), own.split(',')
    if len(theirs) != len(ours):
        return False
    for a, b in zip(theirs, ours):
        if a and b and a.split(':', 1)[0] == b.split(':', 1)[0] and a != b:
            return False
    return True


def content_version(streams: Sequence[Any], catalogue: Any) -> str:
    """A digest of every stream's shard names, hashes and sample counts: the same for a copy of the dataset on any
    machine or under any path (what a resumption state names samples of)."""
    digest = hashlib.blake2b(catalogue.layout_identity().encode(), digest_size=12)
    for index in range(len(streams)):
        digest.update(catalogue.stream_layout(index).encode())
    return digest.hexdigest()


_CTIME = re.compile(r';ctime=\d+')
_INODE = re.compile(r';inode=\d+')


def _every_file_hashed(catalogue: Any, index: int) -> bool:
    """Whether the index of stream ``index`` records a hash for every file (then its content version, which holds
    the hashes, tells versions apart by itself)."""
    source = catalogue.sources[index]
    algorithms = getattr(source, 'hash_algorithms', None)
    if algorithms is None:
        return False
    try:
        return all(algos for _, algos in algorithms())
    except Exception:  # a table that cannot say: compare the remote's identity as well
        return False


def remote_identity(stream: Any, hashed: bool = False) -> str:
    """The identity of the remote version a stream loaded, the same on every machine reading that remote (its
    index's etag / size / modification time, a digest of its bytes or of its listing, a commit), or ``''`` for a
    stream without a remote or one read from a local copy alone (a local file's identity names its inode). The
    change time, which identities made before version 0.2 lack, is left out; so is a local path's inode (a remote on
    a path may be each node's own copy, ``rsync -a``'d: the same size and modification time, another inode), and
    the listing of a remote on a path (its files' change times differ between such copies). A remote on a path whose
    index records a hash for every file (``hashed``) needs no identity: the content version holds the hashes, and each
    node's copy may have other modification times (``cp -r``)."""
    from streaming_core.storage.facade import is_remote
    identity = str(getattr(stream, 'index_identity', None) or '')
    remote = getattr(stream, 'remote_dir', None)
    if not remote or identity.startswith('file:'):
        return ''
    if not is_remote(remote):
        if identity.startswith('derived:') or hashed:
            return ''
        identity = _INODE.sub('', identity)
    return _CTIME.sub('', identity)


def _run_pending_before_fork() -> None:
    """Before this process forks DataLoader workers: compare the pending checks (errors recorded, raised in the
    workers and at the next iteration: a fork hook cannot raise)."""
    if not _pending or _dist() is None or _in_dataloader_worker():
        return
    for check in list(_pending):
        try:
            check.run(raise_error=False)
        except Exception as err:  # a store that fails is the training loop's problem, not this hook's
            logger.debug('dataset version check before fork: %s', err)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(before=_run_pending_before_fork)
