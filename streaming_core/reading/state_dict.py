"""The resumption state dict of a ``StreamingDataset``: its fields, their checks, and a DataLoader worker's position.

A state holds mosaicml-streaming's keys (:data:`STATE_KEYS`: the epoch, the samples the whole world consumed in it,
the order it was planned with) plus ``initial_physical_nodes``, ``dataset_layout`` (the shard layout it names
samples of) and ``dataset_content`` (a digest of the shards' names, hashes and sample counts: which dataset);
torchdata's per-worker state adds ``worker_position`` (:data:`POSITION_FIELDS`). What a state means for every client
is in ``docs/guide/resumption.md``. This module builds such dicts (:func:`make_state`), checks and normalises a
loaded one (:func:`parse_state`) and turns a per-worker state into where this worker starts (:func:`worker_start`);
:class:`~streaming_core.reading.dataset.StreamingDataset` decides when, and keeps the epoch counters it shares with
its DataLoader workers in :mod:`streaming_core.reading.shared_state`.
"""

from __future__ import annotations

import logging
import numbers
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from streaming_core.ordering.world import World

__all__ = ['STATE_KEYS', 'POSITION_FIELDS', 'WorkerPosition', 'make_state', 'parse_state', 'worker_start',
           'loader_had_finished', 'warn_past_the_epoch']

logger = logging.getLogger('streaming_core.reading.state_dict')

#: The keys every state holds (mosaicml-streaming's).
STATE_KEYS = ('epoch', 'sample_in_epoch', 'num_canonical_nodes', 'shuffle_seed')
#: The integer fields of a per-worker state's ``worker_position``.
POSITION_FIELDS = ('worker', 'num_workers', 'num_ranks', 'samples', 'total')


@dataclass
class WorkerPosition:
    """Where this process's (or DataLoader worker's) current epoch stands, for the per-worker state."""

    epoch: int
    offset: int
    skip: int
    total: int
    worker: int
    num_workers: int
    num_ranks: int
    iterator: Any

    @property
    def samples(self) -> int:
        """Samples of this worker's epoch handed out so far (the skipped ones included)."""
        return self.skip + self.iterator.yielded

    def fields(self) -> dict[str, int]:
        """The state's ``worker_position`` for this position (:data:`POSITION_FIELDS`)."""
        return {'worker': self.worker, 'num_workers': self.num_workers, 'num_ranks': self.num_ranks,
                'samples': self.samples, 'total': self.total}


def make_state(epoch: int, sample_in_epoch: int, num_canonical_nodes: int, shuffle_seed: int,
               initial_physical_nodes: int, layout: str, content: str | None = None,
               parallel_shape: tuple[int, int] | None = None) -> dict[str, Any]:
    """A state dict (without ``worker_position``), every count as a plain ``int``; ``parallel_shape`` is the
    data-parallel world that saved it, ``(nodes, ranks per node)`` (see :func:`check_parallel_shape`)."""
    state = {'epoch': int(epoch), 'sample_in_epoch': int(sample_in_epoch),
             'num_canonical_nodes': int(num_canonical_nodes), 'shuffle_seed': int(shuffle_seed),
             'initial_physical_nodes': int(initial_physical_nodes), 'dataset_layout': layout}
    if content is not None:
        state['dataset_content'] = content
    if parallel_shape is not None:
        state['parallel_shape'] = [int(n) for n in parallel_shape]
    return state


def check_parallel_shape(state: Mapping[str, Any], parallel: World, method_name: str, method: Any) -> None:
    """Refuse to resume ``state`` on another data-parallel world when the batching method's plan depends on the
    number of nodes and ranks (it declares ``elastic = False``, as ``per_stream`` and ``device_per_stream`` do: each
    stream is padded per rank, so the same global batch size gives other global batches). The states of other
    methods resume on any world with the same global batch; a state at an epoch's start (``sample_in_epoch`` 0) or
    without ``parallel_shape`` (older, or the reference's) is not checked.

    Raises:
        ValueError: the method is not elastic and the state was saved on another number of nodes or ranks per node.
    """
    saved = state.get('parallel_shape')
    if saved is None or not state.get('sample_in_epoch') or getattr(method, 'elastic', True):
        return  # an epoch's start is the same for every world
    now = [parallel.num_nodes, parallel.ranks_per_node]
    if list(saved) != now:
        raise ValueError(
            f'This resumption state was saved by {saved[0]} node(s) of {saved[1]} data-parallel rank(s) each; this run '
            f'has {now[0]} of {now[1]}. batching_method={method_name!r} cuts each stream per rank, so on another '
            f'number of ranks its global batches differ and a resume would lose and repeat samples. Resume on '
            f'{saved[0]} x {saved[1]} ranks, or use batching_method=\'random\' or \'stratified\', which resume on any '
            f'number of ranks with the same global batch size.')


def parse_state(obj: Any, layout_identity: str, content: str | None = None) -> dict[str, Any]:
    """Check a state dict given to ``load_state_dict`` (ours, torchdata's per-worker one, or mosaicml-streaming's)
    and return it normalised: :data:`STATE_KEYS` as ``int`` (the reference's epoch ``-1``, before its first
    iteration, as the start of epoch 0), ``initial_physical_nodes`` when given, and ``worker_position`` when the
    state is a per-worker one.

    Args:
        obj: The state.
        layout_identity: The loading dataset's shard layout: a state saved for another layout is refused.
        content: The loading dataset's content version (its shards' names, hashes and sample counts): a state saved
            for another dataset is refused (states made before version 0.2 lack it).

    Raises:
        TypeError: ``obj`` is not a mapping.
        ValueError: a key is missing, a field is not an integer or out of range, or the layout differs.
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f'load_state_dict expects a dict, got {type(obj).__name__}.')
    missing = [key for key in STATE_KEYS if key not in obj]
    if missing:
        raise ValueError(f'State dict is missing keys {missing}; expected {list(STATE_KEYS)} '
                         f'(+ initial_physical_nodes).')
    for key in (*STATE_KEYS, 'initial_physical_nodes'):
        value = obj.get(key)
        if key == 'initial_physical_nodes' and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f'State dict field {key!r} must be an integer, got {value!r}.')
    if obj['epoch'] < -1 or obj['sample_in_epoch'] < 0 or obj['num_canonical_nodes'] < 1 \
            or obj['shuffle_seed'] < 0:
        raise ValueError(f'State dict has out-of-range values: {dict(obj)}.')
    layout = obj.get('dataset_layout')
    if layout is not None and layout != layout_identity:
        raise ValueError(f'This resumption state was saved for another version of the dataset (shard layout '
                         f'{layout!r}; this dataset has {layout_identity!r}: its shards or their sample '
                         f'counts changed), so its position would name other samples. Resume with the dataset '
                         f'it was saved with, or start a new run (drop the state).')
    saved = obj.get('dataset_content')
    if saved is not None and content is not None and saved != content:
        raise ValueError(f'This resumption state was saved for another dataset (content {saved!r}; this dataset has '
                         f'{content!r}: the names, hashes or sample counts of its shards differ), so its position '
                         f'would name other samples. Resume with the dataset it was saved with, or start a new run '
                         f'(drop the state).')
    state: dict[str, Any] = {key: int(obj[key]) for key in STATE_KEYS}
    if state['epoch'] == -1:  # the reference's state before its first iteration: nothing was consumed
        state['epoch'], state['sample_in_epoch'] = 0, 0
    if obj.get('initial_physical_nodes') is not None:
        state['initial_physical_nodes'] = int(obj['initial_physical_nodes'])
    shape = obj.get('parallel_shape')
    if shape is not None:
        if not isinstance(shape, (list, tuple)) or len(shape) != 2 or any(
                isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1 for n in shape):
            raise ValueError(f'State dict field parallel_shape must be [nodes, ranks per node] (positive integers), '
                             f'got {shape!r}.')
        state['parallel_shape'] = [int(n) for n in shape]
    position = obj.get('worker_position')
    if position is not None:
        if not isinstance(position, Mapping) or any(
                isinstance(position.get(f), bool) or not isinstance(position.get(f), numbers.Integral)
                for f in POSITION_FIELDS):
            raise ValueError(f'State dict field worker_position must map {list(POSITION_FIELDS)} to integers, got '
                             f'{position!r}.')
        state['worker_position'] = {f: int(position[f]) for f in POSITION_FIELDS}
    return state


def worker_start(state: Mapping[str, Any], world: World, parallel: World,
                 batch_size: Callable[[], int]) -> tuple[int, int, int, bool]:
    """Where this worker starts from a per-worker state (torchdata's ``StatefulDataLoader``): ``(epoch, global start
    offset, samples of this worker to skip, whether it had read its whole share)``.

    Exact with the ``num_workers`` and number of ranks the state was saved with; a worker that had read its whole
    share skips all of it (the dataset decides, from its siblings, whether it starts the next epoch instead: see
    ``StreamingDataset._start_epoch``). A state saved without workers, at a whole batch, converts to a global count.

    Args:
        state: A :func:`parse_state` result holding ``worker_position``.
        world: This worker's world.
        parallel: The world with replication applied (``num_ranks`` counts the distinct ranks).
        batch_size: The dataset's per-device batch size (asked only for the conversion).

    Raises:
        ValueError: the state was saved by another number of ranks or DataLoader workers.
    """
    saved = state['worker_position']
    epoch, offset, samples = int(state['epoch']), int(state['sample_in_epoch']), int(saved['samples'])
    if int(saved['num_ranks']) != parallel.num_ranks:
        raise ValueError(f'This per-worker resumption state was saved by {saved["num_ranks"]} ranks; this run has '
                         f'{parallel.num_ranks}. Resume a different number of ranks from a loader-level state '
                         f'(StreamingDataLoader.state_dict()).')
    if int(saved['num_workers']) == world.workers_per_rank and int(saved['worker']) == world.worker:
        return epoch, offset, samples, samples >= int(saved['total'])
    if int(saved['num_workers']) == 1 and samples % batch_size() == 0:
        return epoch, offset + samples * parallel.num_ranks, 0, False  # one worker read a prefix: exact as a count
    raise ValueError(f'This resumption state was saved by DataLoader worker {saved["worker"]} of '
                     f'{saved["num_workers"]}; this is worker {world.worker} of {world.workers_per_rank}. Resume '
                     f'with num_workers={saved["num_workers"]}, or from a loader-level state '
                     f'(StreamingDataLoader.state_dict()).')


def loader_had_finished(shared: Any, slot: int, world: World, epoch: int, offset: int, finished: bool,
                        timeout: float) -> bool:
    """Whether a DataLoader worker resuming from its own position (torchdata's: :func:`worker_start`) starts the next
    epoch: only when it and every sibling had read their shares (the state was saved after the rank's last batch).
    A worker done while a sibling still had batches left reads nothing more of the epoch: the loader's pass is not
    over. The workers tell each other through the rank's :class:`~streaming_core.reading.shared_state.SharedState`
    (``shared``); a finished worker waits up to ``timeout`` seconds for its siblings to say.
    """
    from streaming_core.reading.shared_state import MAIN_SLOT
    if slot == MAIN_SLOT:
        return finished  # the rank's own process (no DataLoader workers): no sibling
    tag = 1 + ((epoch % (1 << 20)) << 40) + offset % (1 << 40)
    shared.publish_resumed(slot, tag, finished)
    if not finished:
        return False
    deadline = time.monotonic() + timeout
    while True:
        statuses = shared.resumed_statuses(world.workers_per_rank, tag)
        if None not in statuses:
            return not any(statuses)
        if time.monotonic() > deadline:
            logger.warning('DataLoader worker %d resumed with its share of epoch %d read, and not every sibling said '
                           'whether it had read its own within %.0f s: it starts epoch %d.', world.worker, epoch,
                           timeout, epoch + 1)
            return True
        time.sleep(0.005)


def warn_past_the_epoch(epoch: int, offset: int, samples: int, num_canonical_nodes: int) -> None:
    """Warn that a loaded position (``offset`` samples into ``epoch``) lies past the epoch's ``samples`` by more than
    its padding plausibly adds: the state was most likely saved for another, bigger dataset. The position still ends
    the epoch, as the reference's padded end-of-epoch states do. The padding depends on the world that saved the
    state (up to a global batch per canonical row), which a reference state does not record: only a position past
    twice the epoch warns (a tiny dataset on a world whose global batch passes its size may warn falsely)."""
    if offset <= 2 * samples + num_canonical_nodes:
        return
    message = (f'The loaded state is {offset} samples into epoch {epoch}, but an epoch of this dataset has {samples} '
               f'samples: epoch {epoch} counts as done and epoch {epoch + 1} starts. Was the checkpoint saved for '
               f'another dataset?')
    warnings.warn(message, stacklevel=3)
    logger.warning(message)
