"""Refuse a ``StreamingDataset`` that another library shards a second time (accelerate, the Hugging Face Trainer).

A ``StreamingDataset`` already gives each rank its own share of every epoch. accelerate wraps any torch
``IterableDataset`` in its ``IterableDatasetShard`` (each rank keeps 1/N of what it iterates) or, in its default
"dispatch" mode, iterates it on rank 0 only and splits those batches between the ranks: either way a job of N ranks
trains on 1/N of the data, silently. accelerate calls the dataset's ``set_epoch`` (and ``__iter__``) from those
wrappers, so the dataset can see them on the call stack and stop before the first sample.

No import of accelerate happens here: the wrappers are recognised by their module and class names.
"""

from __future__ import annotations

import sys
from types import FrameType

from streaming_core.errors import StreamingError

__all__ = ['ReshardingError', 'refuse_foreign_sharding']

#: accelerate's classes that re-shard (or re-distribute) the batches of an iterable dataset.
_WRAPPERS = {('accelerate.data_loader', 'IterableDatasetShard'), ('accelerate.data_loader', 'DataLoaderDispatcher')}
#: How many callers to look at: the wrapper calls ``set_epoch`` or ``iter()`` on the dataset directly, or through
#: torch's single-process DataLoader iterator (a few frames).
_DEPTH = 12

_ADVICE = ('Use streaming_core.tools.integrations.huggingface.StreamingTrainer in place of transformers.Trainer, or '
           'with accelerate pass a StreamingDataLoader through your own loop and give accelerator.prepare() only the '
           'model and optimizer.')


class ReshardingError(StreamingError, RuntimeError):
    """A ``StreamingDataset`` is being sharded a second time by another library."""


def _wrapper_in(frame: FrameType | None, depth: int) -> object | None:
    """The first accelerate re-sharding wrapper found as ``self`` among the ``depth`` callers of ``frame``."""
    for _ in range(depth):
        if frame is None:
            return None
        owner = frame.f_locals.get('self')
        if owner is not None:
            cls = type(owner)
            if (cls.__module__, cls.__name__) in _WRAPPERS:
                return owner
        frame = frame.f_back
    return None


def _processes(wrapper: object) -> int:
    """The number of processes the wrapper splits the data between."""
    count = getattr(wrapper, 'num_processes', None)
    if count is None:
        state = getattr(wrapper, 'state', None)
        count = getattr(state, 'num_processes', None)
    try:
        return int(count) if count is not None else 1
    except (TypeError, ValueError):
        return 1


def refuse_foreign_sharding(dataset: object, depth: int = _DEPTH) -> None:
    """Raise :class:`ReshardingError` when accelerate re-shards ``dataset`` between several processes.

    Call it from the dataset's ``set_epoch`` and ``__iter__``: it looks at its callers' frames (no collective, no
    import of accelerate) and does nothing with one process or without accelerate on the stack.

    Args:
        dataset: The dataset being iterated (named in the error).
        depth: How many callers to inspect.
    """
    wrapper = _wrapper_in(sys._getframe(1), depth)
    if wrapper is None:
        return
    processes = _processes(wrapper)
    if processes <= 1:
        return
    kind = type(wrapper).__name__
    raise ReshardingError(
        f'accelerate wrapped this {type(dataset).__name__} in its {kind}, which splits the data between '
        f'{processes} processes a second time: each rank would train on 1/{processes} of its share (what the '
        f'Hugging Face Trainer does with an IterableDataset). {_ADVICE}')
