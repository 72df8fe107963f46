"""``StreamingDataLoader``: a ``torch.utils.data.DataLoader`` that counts consumed samples for resumption."""

from __future__ import annotations

import signal
import time
import weakref
from typing import Any, Callable, Iterator

from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _InfiniteConstantSampler

from streaming_core.errors import StreamingError, WorkerDiedError
from streaming_core.reading.dataset import StreamingDataset

__all__ = ['StreamingDataLoader']


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


class _Counted:
    """A ``collate_fn`` wrapper: each batch travels with the number of samples the dataset yielded into it, so the
    loader counts what was read, never a guess from the batch's structure."""

    def __init__(self, collate: Callable[[Any], Any], batched: bool) -> None:
        self.collate = collate
        self.batched = batched

    def __call__(self, samples: Any) -> CountedBatch:
        return CountedBatch(len(samples) if self.batched else 1, self.collate(samples))


_MISUSED = ('This is a StreamingDataLoader\'s batch in transit (the samples with their count), read by another '
            'DataLoader that copied the StreamingDataLoader\'s collate_fn, as accelerate\'s skip_first_batches does. '
            'A StreamingDataLoader resumes from its own state_dict(): load the state and iterate the loader itself; '
            'skipping batches on top of that would skip them twice.')


class CountedBatch:
    """A collated batch and the number of samples in it, from the collate function to the
    :class:`StreamingDataLoader` that unpacks it. Any other reader of it (a loader that copied the collate function)
    fails saying so, instead of seeing a tuple it takes for its batch."""

    __slots__ = ('count', 'batch')

    def __init__(self, count: int, batch: Any) -> None:
        self.count = count
        self.batch = batch

    def __reduce__(self) -> tuple[Any, tuple[int, Any]]:
        return CountedBatch, (self.count, self.batch)

    def pin_memory(self, device: Any = None) -> CountedBatch:
        """The batch pinned (torch's ``pin_memory`` thread calls this)."""
        from torch.utils.data._utils.pin_memory import pin_memory
        return CountedBatch(self.count, pin_memory(self.batch, device))

    def _misused(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(_MISUSED)

    __getitem__ = __iter__ = __len__ = __contains__ = _misused

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f'{name!r}: {_MISUSED}')


class _EpochSampler(_InfiniteConstantSampler):
    """The sampler of an iterable dataset, with the ``set_epoch`` trainers look for on ``loader.sampler`` (Lightning
    calls it at every epoch start, and it is its only epoch signal after an end-of-epoch checkpoint)."""

    def __init__(self, loader: 'StreamingDataLoader') -> None:
        super().__init__()
        self._loader = weakref.ref(loader)

    def set_epoch(self, epoch: int) -> None:
        """Forward to the loader's dataset."""
        loader = self._loader()
        if loader is not None:
            loader.set_epoch(epoch)


#: More samples than any epoch holds: a count that covers the rest of the epoch.
_WHOLE_EPOCH = 1 << 62


class StreamingDataLoader(DataLoader):
    """A DataLoader whose ``state_dict()`` records how many samples the training loop consumed.

    It assumes every rank consumes the same number of samples (what ``StreamingDataset`` guarantees). Prefetched but
    unconsumed batches are not counted, so resuming never skips a sample. A ``StreamingDataset`` without a
    ``batch_size`` adopts the loader's; with DataLoader workers, a dataset ``batch_size`` different from the loader's
    is refused when iteration starts (the resumption count would not be exact).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.num_samples_yielded = 0
        self._ran_out = False  # the last iteration ended by itself: its epoch is over whatever it yielded
        self.collate_fn = _Counted(self.collate_fn, self._auto_collation)
        if isinstance(self.sampler, _InfiniteConstantSampler):  # DataLoader forbids setting it after __init__
            object.__setattr__(self, 'sampler', _EpochSampler(self))
        dataset = self.dataset
        if isinstance(dataset, StreamingDataset) and dataset.batch_size is None and self.batch_size is not None:
            dataset.batch_size = int(self.batch_size)

    def _check_batch_size(self) -> None:
        dataset = self.dataset
        if not isinstance(dataset, StreamingDataset) or self.num_workers == 0:
            return
        if dataset.batch_size is not None and self.batch_size is not None and dataset.batch_size != self.batch_size:
            raise ValueError(f'StreamingDataLoader batch_size={self.batch_size} differs from the dataset\'s '
                             f'batch_size={dataset.batch_size} with num_workers={self.num_workers}: each worker '
                             f'reads whole dataset batches, so a resumption state could not say exactly which '
                             f'samples were consumed. Give both the same per-device batch size (or leave the '
                             f'dataset\'s unset: it adopts the loader\'s).')

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration start ``epoch`` (see :meth:`StreamingDataset.set_epoch`)."""
        setter = getattr(self.dataset, 'set_epoch', None)
        if setter is not None:
            setter(epoch)

    def __iter__(self) -> Iterator[Any]:
        self._check_batch_size()
        if isinstance(self.dataset, StreamingDataset):
            self.dataset._check_resume_world()  # here, not wrapped by a worker's re-raise
            if self.num_workers:
                self.dataset._rank_world()  # the node layout, learnt before the workers fork (they cannot ask)
        self.num_samples_yielded = 0
        self._ran_out = False
        iterator = super().__iter__()
        while True:
            try:
                counted = next(iterator)
            except StopIteration:
                self._ran_out = True
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
            self.num_samples_yielded += counted.count
            yield counted.batch

    def state_dict(self) -> dict[str, Any] | None:
        """The dataset's resumption state, or None when the dataset is not a ``StreamingDataset``."""
        if not isinstance(self.dataset, StreamingDataset):
            return None
        world = self.dataset._rank_world()
        num_samples = self.num_samples_yielded * world.num_ranks
        if self.dataset.replication:
            num_samples //= self.dataset.replication
        if self._ran_out:
            # The loop consumed the epoch, even where samples were never yielded (the tail ``drop_last`` drops, a
            # batching method's partial batches): the state is the next epoch's start, as after any last batch.
            num_samples = max(num_samples, _WHOLE_EPOCH)
        return self.dataset.state_dict(num_samples, False)

    def load_state_dict(self, obj: dict[str, Any]) -> None:
        """Resume the dataset from ``obj`` at the next iteration."""
        if isinstance(self.dataset, StreamingDataset):
            self.dataset.load_state_dict(obj)
            self.num_samples_yielded = 0  # the count of the last iteration is not the loaded position's
            self._ran_out = False

    def __del__(self) -> None:
        iterator = getattr(self, '_iterator', None)
        if iterator is not None and hasattr(iterator, '_shutdown_workers'):
            iterator._shutdown_workers()
