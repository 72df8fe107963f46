"""One worker's pass over its samples for one epoch: a prefetch thread ahead, a lean loop yielding samples.

The sample ids are mapped to ``(shard, index)`` vectorised, chunk by chunk as the loop and the prefetcher reach them
(:mod:`~streaming_core.reading.epoch_positions`: a worker's first sample waits for a small first chunk, never for
its whole share), and cut into *runs*: a run is a stretch of a shard's uses with no gap longer than the keep window
(unbounded without a cache limit, ``predownload`` samples with one), stitched across chunks. A background thread
walks the runs in order of their first use and prepares each shard while the run starts within ``predownload``
samples of the training loop; it sleeps on a condition variable, never polling in a tight loop, and builds the next
chunks when it has nothing to prepare, so the runs' ends are soon final (a shard is released only once its run's
end is final). Without a cache limit it also opens the shard ahead; with one it only downloads it, so shards not
being read stay evictable and no process can hoard the cache. The loop reads from open memory-mapped shards (per
sample: a dict lookup and the decode) and closes (unpins) a shard once its run is behind it.
When the cache is full, the loop releases every pin but the one it needs, so a tight cache thrashes but never
deadlocks: each reading process needs room for one shard.

An error preparing a shard is raised in the loop when it reaches that shard, naming the shard, the remote and
the cause.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
from numpy.typing import NDArray

from streaming_core.errors import CacheLimitError, WaitTimeoutError
from streaming_core.machinery.protocols import ShardView
from streaming_core.reading.epoch_positions import STRETCH_MIN, Chunk, EpochPositions, shard_runs

if TYPE_CHECKING:
    from streaming_core.reading.dataset import StreamingDataset

__all__ = ['EpochIterator', 'shard_runs', 'gc_paused', 'PREFETCH_PATIENCE', 'STRETCH_MIN']

logger = logging.getLogger('streaming_core.reading.iteration')

#: How long the prefetcher waits for cache space before leaving a shard to the loop (seconds).
PREFETCH_PATIENCE = 5.0

#: ``_ready`` once the prefetcher has stopped: every run, known or not yet built, is past waiting for it.
_EVERY_RUN = 1 << 62

#: Seconds without progress after which the loop counts as idle (its DataLoader worker waits for the main process):
#: its pins are then given up when another reader of the node is short of cache room (see ``_relieve``).
IDLE_AFTER = 1.0


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection inside the block (building many small objects at once, as an :class:`EpochIterator`
    does: a collection would only walk them); restores the previous state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class EpochIterator:
    """Iterate one worker's samples for one epoch.

    Args:
        dataset: The dataset (its shard manager does the I/O).
        sample_ids: This worker's sample ids, in order, without padding.
        epoch: The epoch (for messages).
        on_prefetched: Called in a background thread once every shard of the epoch is prepared (the dataset uses
            it to plan the next epoch ahead, so there is no stall at the epoch boundary).
        read: Called with each sample id to produce the sample (a subclass's ``__getitem__``); None reads the
            shard views directly (the fast path, for a dataset that overrides nothing).
        transform: Applied to each sample the fast path reads (``read`` applies its own).
    """

    def __init__(self, dataset: 'StreamingDataset', sample_ids: NDArray[np.int64], epoch: int,
                 on_prefetched: Callable[[], None] | None = None, read: Callable[[int], Any] | None = None,
                 transform: Callable[[Any], Any] | None = None) -> None:
        self.dataset = dataset
        self._on_prefetched = on_prefetched
        self._read = read
        self._transform = None if read is not None else transform
        self._cursor: tuple[int, Any] = (0, iter(()))  # (end, iterator of positions): see `yielded`
        self._extra = 0  # samples handed out beyond their positions (replacements of bad samples)
        self.manager = dataset.shard_manager
        self.manager.adopt_process()  # in a forked worker: take this process's views before the loop captures them
        self.epoch = epoch
        self.count = len(sample_ids)
        self.predownload = max(int(dataset.predownload), 1)
        # Long stretches of one shard (unshuffled or py1s-like orders) are read by the view's own tight loop, in
        # pieces of a quarter of the predownload window so the prefetcher keeps seeing progress.
        gap = self.predownload if self.manager.cache_limit is not None else None
        self._positions = EpochPositions(dataset.catalogue, sample_ids, gap, ids_as_rows=read is not None,
                                         piece=max(self.predownload // 4, STRETCH_MIN))
        self._current: Chunk | None = None  # the chunk the loop is in
        self._cond = threading.Condition()  # guards the positions' tables too (both threads build chunks)
        self._consumer_pos = 0
        self._ready = 0                        # runs [0, _ready) have been handled by the prefetcher
        self._errors: dict[int, BaseException] = {}
        self._stop = False
        self._pressure = False
        self._heap: list[tuple[int, int, int]] = []  # (run end when held, shard, run) of shards held open
        self._open_until: dict[int, int] = {}   # shard -> the run it is held open for (runs count up by start)
        self._thread: threading.Thread | None = None
        self.wait_timeout = max(s.wait_timeout for s in dataset.streams) * 2
        # Without a cache limit the prefetcher also opens (pins) shards ahead; with one it only downloads them, so
        # shards not being read stay evictable and no process can hoard the cache.
        self._open_ahead = self.manager.cache_limit is None
        self._progress = time.monotonic()  # the loop's last sign of life (see _relieve)
        if self.count:
            self._positions.build_next()  # the first (small) chunk: all the first sample needs

    @property
    def yielded(self) -> int:
        """How many samples this iterator has handed out so far (exact while it is suspended at a sample)."""
        end, positions = self._cursor
        return end - positions.__length_hint__() + self._extra

    # ----------------------------------------------------------------------------------------------------------
    def _hold(self, shard: int, run: int) -> None:
        """Record (under the condition's lock) that the shard stays open until the end of its run ``run`` (the end
        known now; a later chunk may extend it: :meth:`_release_behind` checks the final end)."""
        if shard not in self._open_until:
            self.manager.hold(shard)
        if self._open_until.get(shard, -1) < run:
            self._open_until[shard] = run
            heapq.heappush(self._heap, (self._positions.run_end(run), shard, run))

    def _on_cache_pressure(self) -> None:
        """In the prefetch thread, while it waits for room or for another reader's preparation: tell the loop, and
        if the loop is idle (its DataLoader worker waits for the main process) give up its pins to a reader of the node
        short of room, as after the last run (:meth:`_relieve`): that reader may be the one everybody waits for."""
        with self._cond:
            self._pressure = True
            self._relieve()
            self._cond.notify_all()

    def _chunk(self, c: int) -> Chunk:
        """Chunk ``c`` of the positions for the loop (built here if the prefetcher has not); the one before is
        dropped."""
        with self._cond:
            self._current = self._positions.chunk(c)  # built here if need be
            if c:
                self._positions.drop(c - 1)
        return self._current

    def _next_run(self, k: int) -> tuple[int, int] | bool | None:
        """Under the lock: wait until run ``k`` starts within ``predownload`` of the loop and return its ``(shard,
        start)``; None when stopped or when every run is handled. Rather than wait, build the next chunk (the run
        not known yet, or idle time: so the runs' ends are soon final) and return True: call again."""
        positions = self._positions
        while not self._stop:
            window = self._consumer_pos + self.predownload
            if k < positions.num_runs:
                shard, start, _ = positions.run(k)
                if start <= window:
                    return shard, start
            elif positions.complete:
                return None
            # Build when a run in the window may not be known yet, or (idle time) once the loop is past its first
            # samples: never between the loop and its first sample.
            if not positions.complete and (positions.converted <= window or self._consumer_pos > 0):
                self._positions.build_next()
                return True
            self._relieve()
            self._cond.wait(0.05)
        return None

    def _prefetch(self) -> None:
        k = 0
        finished = False
        try:
            while True:
                with self._cond:
                    found = self._next_run(k)
                    if found is None:
                        finished = True
                        break  # not return: the idle loop below must still run
                    if found is not True and self._open_ahead and found[0] in self._open_until:
                        self._hold(found[0], k)  # still open from an earlier run: extend it
                        k += 1
                        self._ready = k
                        self._cond.notify_all()
                        continue
                if found is True:
                    time.sleep(0)  # between two chunk builds, let the loop take the lock
                    continue
                shard = found[0]
                try:
                    if self._open_ahead:
                        self.manager.open(shard)
                        with self._cond:
                            self._hold(shard, k)
                    else:
                        self.manager.prepare(shard, on_wait=self._on_cache_pressure, patience=PREFETCH_PATIENCE)
                except CacheLimitError:
                    pass  # no room yet: the loop prepares it itself when it gets there
                except BaseException as err:  # reported to the loop when it reaches this shard
                    with self._cond:
                        self._errors[shard] = err
                with self._cond:
                    k += 1
                    self._ready = k
                    self._cond.notify_all()
        except Exception as err:  # building a chunk failed: the loop builds it itself and meets the error there
            logger.debug('the prefetcher of epoch %d stopped: %s: %s', self.epoch, type(err).__name__, err)
        finally:
            with self._cond:
                self._ready = _EVERY_RUN  # the loop never waits for this thread again
                self._cond.notify_all()
                stopped = self._stop
            if finished and not stopped and self._on_prefetched is not None:
                threading.Thread(target=self._on_prefetched, name='streaming-core-plan-ahead', daemon=True).start()
        if finished and not self._open_ahead:  # every run handled: stay, to give up the loop's pins when idle
            with self._cond:
                while not self._stop:
                    self._relieve()
                    self._cond.wait(0.1)

    def _relieve(self) -> None:
        """Under the lock, in the prefetch thread: when the loop has been idle for :data:`IDLE_AFTER` (a DataLoader
        worker waiting for the main process, suspended in this generator) and another reader of the node has waited
        a while for cache room, give up every pin the loop holds. A suspended loop cannot do it itself, and the node
        would wait for it until the cache's timeout. Views are dropped, not unmapped (the loop may be in the middle of
        one); a released shard is opened again, downloaded again if it was evicted, when the loop next reads it."""
        if self._open_ahead or not self._open_until or time.monotonic() - self._progress < IDLE_AFTER:
            return
        cache = self.manager.cache
        if cache is None or not cache.short_of_room():
            return
        released = list(self._open_until)
        self._open_until.clear()
        for shard in released:
            self.manager.release(shard)
        logger.debug('epoch %d: idle, gave up %d pinned shard(s) to a reader short of cache room', self.epoch,
                     len(released))

    def _wait_for(self, shard: int, pos: int) -> ShardView:
        """Slow path: the shard is not open. Wait for the prefetcher (bounded), or open it here."""
        self._release_behind(pos)
        current = self._current
        assert current is not None and current.lo <= pos < current.hi
        ordinal = int(current.runs[pos - current.lo])  # runs are numbered in order of start, as the prefetcher walks
        deadline = time.monotonic() + self.wait_timeout
        release = []
        with self._cond:
            self._consumer_pos = pos
            self._cond.notify_all()
            while True:
                error = self._errors.pop(shard, None)
                if error is not None:
                    raise error
                view = self.manager.open_views.get(shard)
                if view is not None and shard in self._open_until:
                    return view
                if self._ready > ordinal or self._thread is None or not self._thread.is_alive():
                    break
                if self._pressure:  # the cache is full of our pins: keep only what we need now
                    self._pressure = False
                    release = [s for s in self._open_until if s != shard]
                    for other in release:
                        del self._open_until[other]
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(f'Timed out after {self.wait_timeout:.0f} s waiting for shard {shard} '
                                           f'({self.manager.readers[shard].parts[0][0].basename}) in epoch '
                                           f'{self.epoch}.')
                self._cond.wait(min(remaining, 0.1))
        for other in release:
            self.manager.release(other)
        if release:
            return self._wait_for(shard, pos)
        view = self.manager.open(shard, on_wait=lambda: self._release_all_except(shard))
        with self._cond:
            self._hold(shard, ordinal)
        return view

    def _release_all_except(self, shard: int) -> None:
        """Called by this loop's own reservation when the cache is full: drop every other pin it holds."""
        with self._cond:
            release = [s for s in self._open_until if s != shard]
            for other in release:
                del self._open_until[other]
        for other in release:
            self.manager.release(other)

    def _release_behind(self, pos: int) -> None:
        """Close the shards whose run is behind ``pos``; let the prefetcher move on."""
        done = []
        with self._cond:
            self._consumer_pos = pos
            self._progress = time.monotonic()
            if self._positions.gap is not None and self._heap and self._heap[0][0] < pos:  # something to release
                self._positions.build_to(pos + self._positions.gap)  # usually done by the prefetcher already
            final = self._positions.ends_final_before(pos)  # else a later chunk may extend a run: keep it open
            while final and self._heap and self._heap[0][0] < pos:
                end, shard, run = heapq.heappop(self._heap)
                if self._open_until.get(shard) != run:
                    continue  # held for a later run of the shard, or released already
                final_end = self._positions.run_end(run)
                if final_end != end:  # extended by a chunk built after it was held
                    heapq.heappush(self._heap, (final_end, shard, run))
                    continue
                del self._open_until[shard]
                done.append(shard)
            self._cond.notify_all()
        for shard in done:
            self.manager.release(shard)

    def _finish(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.wait_timeout)
        with self._cond:
            opened = list(self._open_until)
            self._open_until.clear()
            self._heap.clear()
        for shard in opened:
            self.manager.release(shard)

    # ----------------------------------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        if not self.count:
            return iter(())
        self._thread = threading.Thread(target=self._prefetch, name='streaming-core-prefetch', daemon=True)
        if self.dataset.on_bad_sample == 'raise':
            return self._samples()
        return self._samples_replacing_bad()

    def _samples(self) -> Iterator[Any]:
        """The hot loop (one generator: no ``yield from`` layers between it and the training loop, except a view's
        own tight loop over a long stretch of one shard), chunk by chunk."""
        views = self.manager.open_views
        step = max(self.predownload // 4, 1)
        checkpoint = step
        read, transform = self._read, self._transform
        self._thread.start()
        try:
            for c in range(self._positions.num_chunks):
                chunk = self._chunk(c)
                lo, shards, rows = chunk.lo, chunk.shards, chunk.rows  # rows: the sample ids on the read= path
                if read is None and chunk.stretches is not None:
                    for start, end in chunk.stretches:
                        shard = shards[start - lo]
                        view = views.get(shard)
                        if view is None:
                            view = self._wait_for(shard, start)
                        positions = iter(rows[start - lo:end - lo])  # consumed one per sample handed out: `yielded`
                        self._cursor = (end, positions)
                        many = getattr(view, 'samples', None)
                        samples = map(view.__getitem__, positions) if many is None else many(positions)
                        yield from (samples if transform is None else map(transform, samples))
                        if end > checkpoint:
                            self._release_behind(end)
                            checkpoint = end + step
                    continue
                positions = iter(range(lo, chunk.hi))
                self._cursor = (chunk.hi, positions)
                for pos, shard, row in zip(positions, shards, rows):  # positions first: one taken per sample
                    view = views.get(shard)
                    if view is None:
                        view = self._wait_for(shard, pos)
                    if read is not None:
                        yield read(row)
                    elif transform is None:
                        yield view[row]
                    else:
                        yield transform(view[row])
                    if pos >= checkpoint:
                        self._release_behind(pos)
                        checkpoint = pos + step
        finally:
            self._finish()

    def _samples_replacing_bad(self) -> Iterator[Any]:
        """``on_bad_sample='replace'``: a sample that fails to decode is logged and replaced by the nearest good sample
        of this worker, so every rank still takes the same number of steps."""
        step = max(self.predownload // 4, 1)
        checkpoint = step
        last_good: Any = None
        pending = 0
        error: BaseException | None = None
        read, transform = self._read, self._transform
        self._thread.start()
        try:
            for c in range(self._positions.num_chunks):
                chunk = self._chunk(c)
                positions = iter(range(chunk.lo, chunk.hi))
                self._cursor = (chunk.hi, positions)
                for pos, shard, row in zip(positions, chunk.shards, chunk.rows):
                    view = self.manager.open_views.get(shard)
                    if view is None:
                        view = self._wait_for(shard, pos)
                    try:
                        if read is not None:
                            sample = read(row)
                        elif transform is None:
                            sample = view[row]
                        else:
                            sample = transform(view[row])
                    except Exception as err:  # decode failure of one sample; shard-level failures raise in _wait_for
                        error = err
                        logger.warning('Replacing bad sample %d of shard %s (%s: %s)', row,
                                       self.manager.readers[shard].parts[0][0].basename, type(err).__name__, err)
                        if last_good is None:
                            pending += 1
                            self._extra = -pending  # handed out = positions consumed + _extra
                        else:
                            yield last_good
                    else:
                        for repeat in range(pending + 1):
                            self._extra = repeat - pending
                            yield sample
                        pending = 0
                        last_good = sample
                    if pos >= checkpoint:
                        self._release_behind(pos)
                        checkpoint = pos + step
            if pending:
                raise RuntimeError(f'Every sample of this worker failed to decode in epoch {self.epoch}; nothing '
                                   f'can replace them.') from error
        finally:
            self._finish()
