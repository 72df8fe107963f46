"""``streaming.base.distributed``: the reference's ``torch.distributed`` helpers.

Rank and sizes come from an initialised process group when there is one, else from the environment variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``); the collectives are no-ops without a process
group. Unlike the reference, nothing here (or in the dataset) ever initialises a process group.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ['all_gather', 'barrier', 'broadcast', 'get_rank', 'get_local_rank', 'get_local_world_size',
           'get_world_size']


def _group() -> Any:
    """``torch.distributed`` when a process group is initialised, else None."""
    import torch.distributed as dist
    return dist if dist.is_available() and dist.is_initialized() else None


def _env(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value in (None, ''):
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f'Environment variable {name}={value!r} must be an integer.') from None


def get_rank() -> int:
    """The global rank."""
    dist = _group()
    return dist.get_rank() if dist is not None else _env('RANK', 0)


def get_world_size() -> int:
    """The number of ranks."""
    dist = _group()
    return dist.get_world_size() if dist is not None else _env('WORLD_SIZE', 1)


def get_local_rank() -> int:
    """The rank within this node (``LOCAL_RANK``)."""
    return _env('LOCAL_RANK', 0)


def get_local_world_size() -> int:
    """Ranks per node (``LOCAL_WORLD_SIZE``)."""
    return _env('LOCAL_WORLD_SIZE', 1)


def barrier() -> None:
    """``torch.distributed.barrier()`` when a process group exists."""
    dist = _group()
    if dist is not None:
        dist.barrier()


def broadcast(tensor: Any, src: int) -> None:
    """``torch.distributed.broadcast(tensor, src)`` when a process group exists."""
    dist = _group()
    if dist is not None:
        dist.broadcast(tensor, src)


def all_gather(tensor_list: list[Any], tensor: Any) -> None:
    """``torch.distributed.all_gather(tensor_list, tensor)`` when a process group exists."""
    dist = _group()
    if dist is not None:
        dist.all_gather(tensor_list, tensor)
