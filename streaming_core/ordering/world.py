"""The shape of the training world: nodes, ranks per node, DataLoader workers per rank.

A :class:`World` is read when iteration starts (not at construction), from, in order: an explicit ``world=``
argument, an initialised ``torch.distributed`` process group, the ``RANK``/``WORLD_SIZE``/``LOCAL_WORLD_SIZE``
environment variables, or else a single process. DataLoader worker information is added inside the worker.

Ranks per node: ``LOCAL_WORLD_SIZE`` when the launcher sets it (torchrun, accelerate). Launchers that do not
(Lightning, ``mp.spawn``) still have a process group: each rank then adds its host name to a counter in the group's
rendezvous store when it constructs a dataset (no waiting), and the layout is read from the store in the rank's
main process when first needed, before any DataLoader worker is forked. No collective ever runs, and a forked
DataLoader worker never touches the store. So the same processes get the same order under every launcher.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from streaming_core.errors import StreamingError

__all__ = ['World', 'NodeLayoutError', 'register_node', 'parallel_ranks']

logger = logging.getLogger('streaming_core.ordering.world')

#: How long a rank waits for every rank to register its host in the rendezvous store (seconds).
LAYOUT_TIMEOUT = 300.0
_PREFIX = 'streaming_core/node_layout'
#: Per process: (id of the store, world size) -> (the store, ranks per node), and -> the store this process registered
#: with. The store itself is kept so that its id cannot be reused by a later process group's store while recorded.
_layouts: dict[tuple[int, int], tuple[Any, int]] = {}
_registered: dict[tuple[int, int], Any] = {}
_needed = [False]  # a dataset was constructed in this process: learn the layout before forking workers


class NodeLayoutError(StreamingError, RuntimeError):
    """The ranks per node could not be learnt from the process group."""


def _dist() -> Any:
    dist = sys.modules.get('torch.distributed')
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _in_dataloader_worker() -> bool:
    data = sys.modules.get('torch.utils.data')
    return data is not None and data.get_worker_info() is not None


def _store_key(dist: Any) -> tuple[Any, tuple[int, int]] | None:
    try:
        store = dist.distributed_c10d._get_default_store()
    except Exception:  # a backend without a store: fall back to the environment
        return None
    return store, (id(store), dist.get_world_size())


def register_node() -> None:
    """Add this rank's host to the process group's node count (once per process; never waits). Called when a
    dataset is constructed, so that every rank has registered by the time any of them needs the layout."""
    _needed[0] = True
    dist = _dist()
    if dist is None or os.environ.get('LOCAL_WORLD_SIZE') or _in_dataloader_worker():
        return
    found = _store_key(dist)
    if found is None or _registered.get(found[1]) is found[0]:
        return
    store, key = found
    # The store, not this process, records whether this rank registered: a group re-created on the same store
    # server (or a store at a reused address) never counts a rank twice or misses one.
    if store.add(f'{_PREFIX}/rank/{dist.get_rank()}', 1) == 1:
        store.add(f'{_PREFIX}/host/{socket.gethostname()}', 1)
        if store.add(f'{_PREFIX}/ranks', 1) == dist.get_world_size():
            store.set(f'{_PREFIX}/done', b'1')
    _registered[key] = store


def _store_local_world_size(dist: Any) -> int | None:
    """Ranks per node from the rendezvous store (waits, bounded, until every rank has registered)."""
    found = _store_key(dist)
    if found is None:
        return None
    store, key = found
    known = _layouts.get(key)
    if known is not None and known[0] is store:
        return known[1]
    if _in_dataloader_worker():  # a forked worker shares its parent's store connection: never use it
        raise NodeLayoutError(
            'This DataLoader worker does not know how many ranks run on its node: its process did not learn it '
            'before forking it (every rank registers its host when it first needs the layout, and the wait for the '
            'others timed out; see the warning it logged). Iterate through StreamingDataLoader, which learns it '
            'before its workers start, or set LOCAL_WORLD_SIZE, or pass world=World(...).')
    register_node()
    try:
        store.wait([f'{_PREFIX}/done'], timedelta(seconds=LAYOUT_TIMEOUT))
    except Exception as err:
        raise NodeLayoutError(
            f'Not every rank registered its host within {LAYOUT_TIMEOUT:.0f} s, so the ranks per node are unknown. '
            f'A rank registers when it first needs the layout (to read, or to start DataLoader workers): another '
            f'rank has not got there, for example because it waits in a barrier while only this rank reads '
            f'(reading on one rank alone, or forking a process on one rank, needs the layout). Set '
            f'LOCAL_WORLD_SIZE (torchrun sets it), or pass world=World(...).') from err
    local = int(store.get(f'{_PREFIX}/host/{socket.gethostname()}'))
    world_size = dist.get_world_size()
    if local < 1 or world_size % local:
        logger.warning('Host %s runs %d of %d ranks: nodes are uneven, so each rank counts as its own node.',
                       socket.gethostname(), local, world_size)
        local = 1
    _layouts[key] = (store, local)
    return local


def _resolve_before_fork() -> None:
    """Before this process forks (DataLoader workers): learn the layout here if it registered and has not yet."""
    dist = _dist()
    if dist is None or not _needed[0] or os.environ.get('LOCAL_WORLD_SIZE') or _in_dataloader_worker():
        return
    if not _forking_data_workers():  # another fork (a callback's helper on one rank): learn it only if it is known
        _learn_if_registered(dist)
        return
    started = time.monotonic()
    try:
        _store_local_world_size(dist)
    except Exception as err:  # reported again where the layout is used (a DataLoader worker refuses to guess it)
        logger.warning('Forking without the node layout after %.0f s: %s', time.monotonic() - started, err)
    else:
        if time.monotonic() - started > 5:
            logger.warning('This fork waited %.0f s for every rank to register its host (the node layout that '
                           'forked DataLoader workers need). Set LOCAL_WORLD_SIZE to skip the wait.',
                           time.monotonic() - started)


def _forking_data_workers() -> bool:
    """Whether this fork starts DataLoader workers (torch's or torchdata's loader is on the stack): only those need
    the layout, so only they wait for the other ranks to register."""
    frame = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get('__name__', ''))
        if module.startswith(('torch.utils.data', 'torchdata')):
            return True
        frame = frame.f_back
    return False


def _learn_if_registered(dist: Any) -> None:
    """The layout if every rank has registered already (never waits), for the children this fork makes."""
    found = _store_key(dist)
    if found is None or _in_dataloader_worker():
        return
    store, key = found
    known = _layouts.get(key)
    if known is not None and known[0] is store:
        return
    try:
        register_node()
        if store.check([f'{_PREFIX}/done']):
            _store_local_world_size(dist)
    except Exception as err:  # a store that cannot answer now: the fork goes on without it
        logger.debug('node layout before fork: %s', err)


if hasattr(os, 'register_at_fork'):
    os.register_at_fork(before=_resolve_before_fork)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value.strip() == '':
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f'Environment variable {name}={value!r} is not an integer.') from None


@dataclass(frozen=True)
class World:
    """Where this process sits in the training world.

    Args:
        rank: The global rank, ``0 <= rank < world_size``.
        world_size: The number of ranks (processes that each train on their own data).
        local_world_size: The number of ranks per node. ``world_size`` must be divisible by it. Defaults to 1,
            like the reference when ``LOCAL_WORLD_SIZE`` is unset (every rank then counts as its own node).
        worker: This DataLoader worker's index within its rank (0 with ``num_workers=0``).
        workers_per_rank: The DataLoader's ``num_workers`` (1 with ``num_workers=0``).
    """

    rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    worker: int = 0
    workers_per_rank: int = 1

    def __post_init__(self) -> None:
        for name in ('rank', 'world_size', 'local_world_size', 'worker', 'workers_per_rank'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                try:
                    object.__setattr__(self, name, int(value))
                except (TypeError, ValueError):
                    raise TypeError(f'World.{name} must be an integer, got {value!r}.') from None
        if self.world_size < 1:
            raise ValueError(f'World.world_size must be at least 1, got {self.world_size}.')
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f'World.rank must be in [0, {self.world_size}), got {self.rank}.')
        if self.local_world_size < 1 or self.world_size % self.local_world_size:
            raise ValueError(f'World.world_size ({self.world_size}) must be a positive multiple of '
                             f'local_world_size ({self.local_world_size}): every node runs the same number of ranks.')
        if self.workers_per_rank < 1 or not 0 <= self.worker < self.workers_per_rank:
            raise ValueError(f'World.worker must be in [0, workers_per_rank={self.workers_per_rank}), '
                             f'got {self.worker}.')

    # The reference's derived quantities.
    @property
    def num_nodes(self) -> int:
        """The number of nodes."""
        return self.world_size // self.local_world_size

    @property
    def ranks_per_node(self) -> int:
        """Ranks per node (``local_world_size``)."""
        return self.local_world_size

    @property
    def num_ranks(self) -> int:
        """The number of ranks (``world_size``)."""
        return self.world_size

    @property
    def node(self) -> int:
        """This rank's node."""
        return self.rank // self.local_world_size

    @property
    def rank_of_node(self) -> int:
        """This rank's index within its node (the local rank)."""
        return self.rank % self.local_world_size

    @property
    def worker_of_rank(self) -> int:
        """This worker's index within its rank."""
        return self.worker

    @property
    def workers_per_node(self) -> int:
        """DataLoader workers per node."""
        return self.local_world_size * self.workers_per_rank

    @property
    def num_workers(self) -> int:
        """DataLoader workers in the whole world."""
        return self.world_size * self.workers_per_rank

    @property
    def global_worker(self) -> int:
        """This worker's global index: ``rank * workers_per_rank + worker``."""
        return self.rank * self.workers_per_rank + self.worker

    @property
    def worker_of_node(self) -> int:
        """This worker's index within its node."""
        return self.global_worker % self.workers_per_node

    @property
    def is_leader(self) -> bool:
        """Whether this is the first worker of the world."""
        return self.global_worker == 0

    @property
    def is_local_leader(self) -> bool:
        """Whether this is the first worker of its node."""
        return self.worker_of_node == 0

    # Construction helpers.
    @classmethod
    def from_env(cls) -> 'World':
        """The world the environment variables describe (``RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``)."""
        world_size = _env_int('WORLD_SIZE', 1)
        return cls(rank=_env_int('RANK', 0), world_size=world_size,
                   local_world_size=_env_int('LOCAL_WORLD_SIZE', 1))

    @classmethod
    def from_torch_distributed(cls) -> 'World | None':
        """The world of an initialised ``torch.distributed`` process group, or None. Ranks per node come from
        ``LOCAL_WORLD_SIZE``, else from the hosts the ranks registered in the group's store (see the module doc)."""
        dist = _dist()
        if dist is None:
            return None
        world_size = dist.get_world_size()
        if os.environ.get('LOCAL_WORLD_SIZE'):
            local = _env_int('LOCAL_WORLD_SIZE', 1)
        else:
            local = _store_local_world_size(dist) or 1
        if world_size % local:
            local = 1
        return cls(rank=dist.get_rank(), world_size=world_size, local_world_size=local)

    @classmethod
    def detect(cls, explicit: 'World | None' = None) -> 'World':
        """The rank-level world: ``explicit`` if given, else torch.distributed, else the environment."""
        if explicit is not None:
            if not isinstance(explicit, World):
                raise TypeError(f'world must be a streaming_core.World, got {type(explicit).__name__}.')
            return replace(explicit, worker=0, workers_per_rank=1)
        found = cls.from_torch_distributed()
        return found if found is not None else cls.from_env()

    def with_dataloader_worker(self) -> 'World':
        """This world with the current DataLoader worker's index and count (unchanged outside a worker)."""
        info = _worker_info()
        if info is None:
            return replace(self, worker=0, workers_per_rank=1)
        return replace(self, worker=info.id, workers_per_rank=info.num_workers)

    def replicate(self, replication: int | None) -> 'World':
        """The parallel world when ``replication`` consecutive ranks read identical samples.

        Follows the reference: ``rank // r`` of ``world_size // r`` ranks; when those ranks no longer fill
        whole nodes, they form a single node.
        """
        if replication is None or replication == 1:
            return self
        if replication <= 0:
            raise ValueError('Replication factor must be positive.')
        if self.world_size % replication:
            raise ValueError(f'World size must be divisible by your replication factor: world_size '
                             f'{self.world_size}, replication {replication}.')
        ranks = self.world_size // replication
        local = self.local_world_size if ranks % self.local_world_size == 0 else ranks
        return replace(self, rank=self.rank // replication, world_size=ranks, local_world_size=local)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict."""
        return {'rank': self.rank, 'world_size': self.world_size, 'local_world_size': self.local_world_size,
                'worker': self.worker, 'workers_per_rank': self.workers_per_rank}


def parallel_ranks(explicit: World | None, snapshot: World | None, replication: int | None) -> int:
    """The number of ranks reading distinct samples (world size over ``replication``) in the world a dataset detects
    now (``explicit``, else ``torch.distributed``, else ``snapshot``, else the environment), without learning the node
    layout: that waits until every rank has registered, and a rank alone asking (``len(dataset)`` on rank 0 while the
    others wait in a barrier) would wait for ever."""
    dist = _dist() if explicit is None else None
    if explicit is not None:
        world = World.detect(explicit)
    elif dist is not None:
        world = World(rank=dist.get_rank(), world_size=dist.get_world_size())
    else:
        world = snapshot if snapshot is not None else World.from_env()
    return world.replicate(replication).num_ranks


def _worker_info() -> Any:
    import sys
    data = sys.modules.get('torch.utils.data')
    if data is None:
        return None
    return data.get_worker_info()
