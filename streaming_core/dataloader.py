"""``StreamingDataLoader``: a ``torch.utils.data.DataLoader`` that counts consumed samples for resumption."""

from __future__ import annotations

import signal
import time
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader

from streaming_core.dataset import StreamingDataset
from streaming_core.errors import StreamingError, WorkerDiedError

__all__ = ['StreamingDataLoader', 'batch_size_of']


def batch_size_of(batch: Any) -> int:
    """The number of samples in a collated batch (dicts and mappings, tensors, sequences)."""
    if isinstance(batch, torch.Tensor):
        return len(batch)
    if hasattr(batch, 'keys') and hasattr(batch, '__getitem__'):
        keys = list(batch.keys())
        return batch_size_of(batch[keys[0]]) if keys else 0
    if isinstance(batch, (list, tuple)):
        if batch and isinstance(batch[0], (torch.Tensor, list, tuple)) and not isinstance(batch[0], (str, bytes)):
            return batch_size_of(batch[0])
        return len(batch)
    return len(batch)


def _dead_workers(iterator: Any, wait: float = 1.0) -> list[str]:
    """'(pid N) killed by SIGKILL' for each worker process of ``iterator`` that was killed or failed.

    A dying process closes its sockets a moment before it can be reaped, so this looks for up to ``wait`` seconds.
    """
    workers = getattr(iterator, '_workers', None) or []
    deadline = time.monotonic() + wait
    while True:
        dead = []
        for worker in workers:
            code = worker.exitcode
            if not code:  # alive, or finished normally
                continue
            try:
                how = f'killed by {signal.Signals(-code).name}' if code < 0 else f'exited with status {code}'
            except ValueError:
                how = f'killed by signal {-code}'
            dead.append(f'(pid {worker.pid}) {how}')
        if dead or not workers or time.monotonic() >= deadline:
            return dead
        time.sleep(0.02)


class StreamingDataLoader(DataLoader):
    """A DataLoader whose ``state_dict()`` records how many samples the training loop consumed.

    It assumes every rank consumes the same number of samples (what ``StreamingDataset`` guarantees). Prefetched but
    unconsumed batches are not counted, so resuming never skips a sample.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0

    def __iter__(self) -> Iterator[Any]:
        self.num_samples_yielded = 0
        iterator = super().__iter__()
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except (ConnectionError, EOFError) as err:
                # A worker killed while the main process fetched a tensor it shared surfaces from torch as a bare
                # "Connection reset by peer"; say which worker died and how. Our own errors, re-raised from a
                # worker, pass through untouched.
                dead = [] if isinstance(err, StreamingError) else _dead_workers(iterator)
                if not dead:
                    raise
                raise WorkerDiedError(f'DataLoader worker {", ".join(dead)}; its batches are lost. Resume from '
                                      'the last state_dict() (the usual cause of a kill is the out-of-memory '
                                      'killer: fewer workers or a smaller prefetch_factor help)') from err
            self.num_samples_yielded += batch_size_of(batch)
            yield batch

    def state_dict(self) -> dict[str, Any] | None:
        """The dataset's resumption state, or None when the dataset is not a ``StreamingDataset``."""
        if not isinstance(self.dataset, StreamingDataset):
            return None
        world = self.dataset._rank_world()
        num_samples = self.num_samples_yielded * world.num_ranks
        if self.dataset.replication:
            num_samples //= self.dataset.replication
        return self.dataset.state_dict(num_samples, False)

    def load_state_dict(self, obj: dict[str, Any]) -> None:
        """Resume the dataset from ``obj`` at the next iteration."""
        if isinstance(self.dataset, StreamingDataset):
            self.dataset.load_state_dict(obj)

    def __del__(self) -> None:
        iterator = getattr(self, '_iterator', None)
        if iterator is not None and hasattr(iterator, '_shutdown_workers'):
            iterator._shutdown_workers()
