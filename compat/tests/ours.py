"""Our side of the compat cases: the same dataset descriptions run through streaming-core."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ['make_dataset', 'iterate', 'plans', 'loader', 'batch_ids', 'checkpoint', 'resume', 'assert_same_error']


def make_dataset(data_dir: str, case: dict[str, Any]) -> Any:
    """Our ``StreamingDataset`` for a case (``local`` or ``streams``, plus ``kwargs``), as the reference builds it."""
    from streaming_core import Stream, StreamingDataset
    kwargs = dict(case.get('kwargs', {}))
    if case.get('streams'):
        streams = []
        for spec in case['streams']:
            spec = dict(spec)
            spec['local'] = os.path.join(data_dir, spec['local'])
            streams.append(Stream(**spec))
        return StreamingDataset(streams=streams, **kwargs)
    return StreamingDataset(local=os.path.join(data_dir, case['local']), **kwargs)


def iterate(data_dir: str, case: dict[str, Any]) -> dict[str, Any]:
    """``{'epochs': [[id, ...], ...]}``: ``case['epochs']`` epochs iterated in this process."""
    dataset = make_dataset(data_dir, case)
    return {'epochs': [[int(sample['id']) for sample in dataset] for _ in range(case.get('epochs', 1))]}


def plans(data_dir: str, case: dict[str, Any]) -> dict[str, Any]:
    """``{'plans': [{'shape', 'ids'}, ...]}``: our whole-world plan at each ``(epoch, sample_in_epoch)``."""
    from streaming_core import World
    dataset = make_dataset(data_dir, case)
    num_nodes, ranks_per_node, workers_per_rank = case['world']
    world = World(rank=0, world_size=num_nodes * ranks_per_node, local_world_size=ranks_per_node, worker=0,
                  workers_per_rank=workers_per_rank)
    out = []
    for epoch, sample_in_epoch in case.get('at', [[0, 0]]):
        plan = np.asarray(dataset.get_plan(world, epoch=epoch, sample_in_epoch=sample_in_epoch))
        assert plan.dtype == np.int64, f'plans are int64, got {plan.dtype}'
        out.append({'shape': list(plan.shape), 'ids': [int(x) for x in plan.flatten()]})
    return {'plans': out}


def loader(data_dir: str, case: dict[str, Any]) -> Any:
    """Our ``StreamingDataLoader`` over the case's dataset (``num_workers`` from the case, default 0)."""
    from streaming_core import StreamingDataLoader
    return StreamingDataLoader(make_dataset(data_dir, case), batch_size=case['kwargs']['batch_size'],
                               num_workers=case.get('num_workers', 0))


def batch_ids(batch: Any) -> list[int]:
    """The ``id`` column of a collated batch."""
    ids = batch['id']
    if hasattr(ids, 'tolist'):
        ids = ids.tolist()
    return [int(x) for x in ids]


def resume(data_dir: str, case: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """Load ``state`` into a new dataset and loader: ``{'rest': [...], 'next': [...]}``."""
    dl = loader(data_dir, case)
    dl.load_state_dict(state)
    rest = [i for batch in dl for i in batch_ids(batch)]
    following = [i for batch in dl for i in batch_ids(batch)]
    return {'rest': rest, 'next': following}


def checkpoint(data_dir: str, case: dict[str, Any]) -> dict[str, Any]:
    """Run to the case's checkpoint and take the state: ``{'first': [...], 'state': {...}}``."""
    dl = loader(data_dir, case)
    for _ in range(case.get('full_epochs', 0)):
        for _batch in dl:
            pass
    first = []
    if case['batches']:
        for k, batch in enumerate(dl):
            first.extend(batch_ids(batch))
            if k + 1 == case['batches']:
                break
    return {'first': first, 'state': dl.state_dict()}


def assert_same_error(ref: dict[str, Any], fn: Any, *args: Any) -> None:
    """The reference raised for this case: ours must raise too, an instance of the same built-in exception type
    (``ValueError``, ``RuntimeError``...) when the reference's is built in, so callers' ``except`` clauses hold.
    """
    import builtins
    name = ref['error'].split(':', 1)[0]
    expected = getattr(builtins, name, None)
    expected = expected if isinstance(expected, type) and issubclass(expected, BaseException) else Exception
    try:
        fn(*args)
    except Exception as err:
        assert isinstance(err, expected), f'the reference raises {ref["error"]!r}; ours raises a ' \
            f'{type(err).__name__} that is not a {expected.__name__}: {err}'
        return
    raise AssertionError(f'the reference raises for this case but ours does not: {ref["error"]}')


def rank_iterate(data_dir: str, case: dict[str, Any], rank: int, state: dict[str, Any] | None = None) -> list[int]:
    """The ``id`` of every sample rank ``rank`` of ``case['world']`` reads in one epoch, iterated in this process
    (``num_workers=0``) with an explicit ``world=``; after ``load_state_dict(state)`` when given.
    """
    from streaming_core import World
    num_nodes, ranks_per_node, _ = case['world']
    world = World(rank=rank, world_size=num_nodes * ranks_per_node, local_world_size=ranks_per_node)
    dataset = make_dataset(data_dir, dict(case, kwargs=dict(case['kwargs'], world=world)))
    if state is not None:
        dataset.load_state_dict(state)
    return [int(sample['id']) for sample in dataset]


def rank_sequence(plan: dict[str, Any], rank: int, ids: list[int]) -> list[int]:
    """What rank ``rank`` receives from a whole-world plan, as a DataLoader reads it: device batch ``j`` comes from
    worker ``j % workers`` (its batch ``j // workers``); ``-1`` padding is skipped; indices map to ``ids``.
    """
    nodes, ranks, workers, batches, batch = plan['shape']
    arr = np.asarray(plan['ids'], dtype=np.int64).reshape(plan['shape'])
    mine = arr[rank // ranks, rank % ranks]
    out = []
    for j in range(workers * batches):
        out.extend(ids[i] for i in mine[j % workers, j // workers] if i >= 0)
    return out
