"""One worker's pass over its samples for one epoch: a prefetch thread ahead, a lean loop yielding samples.

The sample ids are mapped to ``(shard, index)`` once, vectorised. A background thread walks the shards in the
order they are first needed and prepares, pins and opens each one while it is within ``predownload`` samples of
the training loop; it sleeps on a condition variable, never polling in a tight loop. The loop itself reads
from already-open memory-mapped shards: per sample, two list lookups, a dict lookup and the decode. A shard is
closed (and unpinned) once the loop has passed its last use. An error preparing a shard is raised in the loop
when it reaches that shard, naming the shard, the remote and the cause.
"""

from __future__ import annotations

import heapq
import threading
import time
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import WaitTimeoutError

if TYPE_CHECKING:
    from streaming_core.dataset import StreamingDataset

__all__ = ['EpochIterator']


class EpochIterator:
    """Iterate one worker's samples for one epoch.

    Args:
        dataset: The dataset (its shard manager does the I/O).
        sample_ids: This worker's sample ids, in order, without padding.
        epoch: The epoch (for messages).
    """

    def __init__(self, dataset: 'StreamingDataset', sample_ids: NDArray[np.int64], epoch: int) -> None:
        self.dataset = dataset
        self.manager = dataset._shards_manager
        self.epoch = epoch
        self.count = len(sample_ids)
        shards, indices = dataset.spanner.locate(sample_ids)
        self._ids = sample_ids.tolist() if not dataset._fast_getitem else None
        self._shards = shards.tolist()
        self._indices = indices.tolist()
        order_shards, first = np.unique(shards, return_index=True)
        by_first = np.argsort(first, kind='stable')
        self._need_shards = order_shards[by_first].tolist()
        self._need_pos = first[by_first].tolist()
        reverse_shards, reverse_first = np.unique(shards[::-1], return_index=True)
        self._last_use = dict(zip(reverse_shards.tolist(), (self.count - 1 - reverse_first).tolist()))
        self._ordinal = {shard: k for k, shard in enumerate(self._need_shards)}
        self.predownload = max(int(dataset.predownload), 1)
        self._cond = threading.Condition()
        self._consumer_pos = 0
        self._ready = 0          # shards [0, _ready) of _need_shards have been handled by the prefetcher
        self._errors: dict[int, BaseException] = {}
        self._stop = False
        self._opened: list[tuple[int, int]] = []   # heap of (last use, shard) for shards we opened
        self._opened_set: set[int] = set()
        self._thread: threading.Thread | None = None
        self.wait_timeout = max(s.wait_timeout for s in dataset.streams) * 2

    # ----------------------------------------------------------------------------------------------------------
    def _prefetch(self) -> None:
        try:
            for k, (shard, pos) in enumerate(zip(self._need_shards, self._need_pos)):
                with self._cond:
                    while not self._stop and pos > self._consumer_pos + self.predownload:
                        self._cond.wait(0.05)
                    if self._stop:
                        return
                try:
                    self.manager.open(shard)
                    with self._cond:
                        if shard not in self._opened_set:
                            self._opened_set.add(shard)
                            heapq.heappush(self._opened, (self._last_use[shard], shard))
                except BaseException as err:  # reported to the loop when it reaches this shard
                    with self._cond:
                        self._errors[shard] = err
                with self._cond:
                    self._ready = k + 1
                    self._cond.notify_all()
        finally:
            with self._cond:
                self._ready = len(self._need_shards)
                self._cond.notify_all()

    def _wait_for(self, shard: int, pos: int) -> Any:
        """Slow path: the shard is not open yet. Wait for the prefetcher (bounded), or open it here."""
        deadline = time.monotonic() + self.wait_timeout
        ordinal = self._ordinal[shard]
        with self._cond:
            self._consumer_pos = pos
            self._cond.notify_all()
            while True:
                error = self._errors.pop(shard, None)
                if error is not None:
                    raise error
                view = self.manager._views.get(shard)
                if view is not None:
                    return view
                if self._ready > ordinal or self._thread is None or not self._thread.is_alive():
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(f'Timed out after {self.wait_timeout:.0f} s waiting for shard {shard} '
                                           f'({self.manager.readers[shard].parts[0][0].basename}) in epoch '
                                           f'{self.epoch}.')
                self._cond.wait(min(remaining, 1.0))
        view = self.manager.open(shard)
        with self._cond:
            if shard not in self._opened_set:
                self._opened_set.add(shard)
                heapq.heappush(self._opened, (self._last_use[shard], shard))
        return view

    def _close_done(self, pos: int) -> None:
        """Close the shards whose last use is behind ``pos``; let the prefetcher move on."""
        with self._cond:
            self._consumer_pos = pos
            done = []
            while self._opened and self._opened[0][0] < pos:
                done.append(heapq.heappop(self._opened)[1])
            for shard in done:
                self._opened_set.discard(shard)
            self._cond.notify_all()
        for shard in done:
            self.manager.close(shard)

    def _finish(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.wait_timeout)
        with self._cond:
            opened = list(self._opened_set)
            self._opened.clear()
            self._opened_set.clear()
        for shard in opened:
            self.manager.close(shard)

    # ----------------------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        if not self.count:
            return
        self._thread = threading.Thread(target=self._prefetch, name='streaming-core-prefetch', daemon=True)
        self._thread.start()
        shards, indices, ids = self._shards, self._indices, self._ids
        views = self.manager._views
        step = max(self.predownload // 4, 1)
        checkpoint = step
        getitem = self.dataset.__getitem__
        try:
            for pos in range(self.count):
                shard = shards[pos]
                view = views.get(shard)
                if view is None:
                    view = self._wait_for(shard, pos)
                if ids is None:
                    yield view[indices[pos]]
                else:
                    yield getitem(ids[pos])
                if pos >= checkpoint:
                    self._close_done(pos)
                    checkpoint = pos + step
        finally:
            self._finish()
