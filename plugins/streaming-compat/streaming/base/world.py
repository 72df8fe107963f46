"""``streaming.base.world``: :class:`World` with the reference's constructor.

``World(num_nodes, ranks_per_node, workers_per_rank, worker)`` (``worker`` = the global worker index,
``rank * workers_per_rank + worker_of_rank``) builds streaming-core's :class:`streaming_core.World`, so it can be
passed wherever ours is accepted (``StreamingDataset(world=...)``, ``dataset.get_plan(world, ...)``). The keyword
form of streaming-core (``rank=``, ``world_size=``, ``local_world_size=``) is accepted as well.
"""

from __future__ import annotations

from streaming_core.ordering.world import World as _CoreWorld

__all__ = ['World']


class World(_CoreWorld):
    """A training world: nodes, ranks per node, DataLoader workers per rank, and which worker this is.

    Args:
        num_nodes: The number of nodes.
        ranks_per_node: Ranks (devices) per node.
        workers_per_rank: DataLoader workers per rank.
        worker: The global worker index of this process.
        rank: (streaming-core form) the global rank; with ``world_size`` and ``local_world_size`` it replaces the
            four arguments above, and ``worker`` is then the worker's index within its rank.
        world_size: (streaming-core form) the number of ranks.
        local_world_size: (streaming-core form) ranks per node.
    """

    def __init__(self, num_nodes: int = 1, ranks_per_node: int = 1, workers_per_rank: int = 1, worker: int = 0, *,
                 rank: int | None = None, world_size: int | None = None, local_world_size: int | None = None) -> None:
        if rank is None and world_size is None and local_world_size is None:
            for name, value in (('num_nodes', num_nodes), ('ranks_per_node', ranks_per_node),
                                ('workers_per_rank', workers_per_rank)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f'World: {name} must be a positive integer, got {value!r}.')
            total = num_nodes * ranks_per_node * workers_per_rank
            if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < total:
                raise ValueError(f'World: worker must be a global worker index in [0, {total}), got {worker!r}.')
            fields = {'rank': worker // workers_per_rank, 'world_size': num_nodes * ranks_per_node,
                      'local_world_size': ranks_per_node, 'worker': worker % workers_per_rank,
                      'workers_per_rank': workers_per_rank}
        else:
            fields = {'rank': 0 if rank is None else rank, 'world_size': 1 if world_size is None else world_size,
                      'local_world_size': 1 if local_world_size is None else local_world_size, 'worker': worker,
                      'workers_per_rank': workers_per_rank}
        for name, value in fields.items():
            object.__setattr__(self, name, value)
        self.__post_init__()
