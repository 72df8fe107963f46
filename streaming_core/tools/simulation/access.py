"""What each node reads, step by step, from the library's own planning code.

Every epoch is planned by :class:`~streaming_core.ordering.planner.EpochPlanner` for a
:class:`~streaming_core.ordering.world.World` of the simulated shape (``plan_node`` for one node; one ``plan`` sliced
per node otherwise, which is the same result computed once), exactly as :class:`~streaming_core.StreamingDataset`
plans it. A node's plan is ``(ranks, workers, batches, batch)``; DataLoader workers take turns, so at global step
``s`` each rank reads batch ``s // workers`` of worker ``s % workers``. The samples of a step are mapped to their
shards; a node's *access stream* is the list of ``(step, shard)`` pairs, each shard once per step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streaming_core.ordering.planner import EpochPlanner
from streaming_core.ordering.world import World
from streaming_core.tools.simulation.shapes import NO_SHUFFLE, DatasetShape, TrainingShape

__all__ = ['AccessStream', 'make_planner', 'make_world', 'epoch_plans', 'step_samples', 'device_streams',
           'shard_of', 'access_stream']


@dataclass
class AccessStream:
    """One node's reads over the run.

    Attributes:
        steps: The global step of each access (non-decreasing).
        shards: The shard read (each shard at most once per step).
        epoch_starts: The first global step of each epoch, plus the total number of steps at the end.
    """

    steps: NDArray[np.int64]
    shards: NDArray[np.int64]
    epoch_starts: list[int]

    @property
    def total_steps(self) -> int:
        """Steps in the run."""
        return self.epoch_starts[-1]


def make_planner(dataset: DatasetShape, training: TrainingShape, algo: str) -> EpochPlanner:
    """The planner :class:`~streaming_core.StreamingDataset` would build for this dataset and run."""
    shuffle = algo != NO_SHUFFLE
    return EpochPlanner(
        samples_per_shard=dataset.samples_per_shard, shards_per_stream=np.array([dataset.num_shards]),
        choose_per_stream=np.array([dataset.num_samples]), proportion_per_stream=np.array([1.0]),
        epoch_size=dataset.num_samples, batch_size=int(training.batch_size),
        num_canonical_nodes=training.ncn(algo), shuffle=shuffle, shuffle_algo=algo if shuffle else 'py1e',
        shuffle_seed=int(training.shuffle_seed), shuffle_block_size=training.block_size(algo),
        partition_algo=training.partition_algo)


def make_world(training: TrainingShape) -> World:
    """The world of the simulated run (rank 0's view; planning covers every rank)."""
    return World(rank=0, world_size=training.devices, local_world_size=int(training.ranks_per_node),
                 workers_per_rank=int(training.workers))


def epoch_plans(planner: EpochPlanner, world: World, epoch: int) -> list[NDArray[np.int64]]:
    """Every node's plan ``(ranks, workers, batches, batch)`` for one epoch (``-1`` is padding)."""
    if world.num_nodes == 1:
        return [np.asarray(planner.plan_node(world, epoch, 0, 0))]
    whole = np.asarray(planner.plan(world, epoch, 0))
    return [whole[node] for node in range(world.num_nodes)]


def step_samples(plan: NDArray[np.int64]) -> NDArray[np.int64]:
    """``(steps, ranks * batch)``: the node's sample ids at each step of the epoch."""
    ranks, workers, batches, batch = plan.shape
    return plan.transpose(2, 1, 0, 3).reshape(batches * workers, ranks * batch)


def device_streams(plan: NDArray[np.int64]) -> NDArray[np.int64]:
    """``(ranks, samples)``: each device's samples in the order it receives them (with ``-1`` padding)."""
    return plan.transpose(0, 2, 1, 3).reshape(plan.shape[0], -1)


def shard_of(sample_ids: NDArray[np.int64], shard_ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """The shard of each sample id (``-1`` stays ``-1``); a division when all shards but the last have one size."""
    sizes = np.diff(shard_ends, prepend=0)
    if len(sizes) > 1 and bool((sizes[:-1] == sizes[0]).all()) and sizes[-1] <= sizes[0]:
        shards = sample_ids // int(sizes[0])
    else:
        shards = np.searchsorted(shard_ends, sample_ids, side='right').astype(np.int64)
    shards[sample_ids < 0] = -1
    return shards


def _per_step_unique(shards: NDArray[np.int64], first_step: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Flatten ``(steps, k)`` shard ids to ``(step, shard)`` pairs, each shard once per step, padding dropped."""
    ordered = np.sort(shards, axis=1)
    keep = ordered >= 0
    keep[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    rows = np.broadcast_to(np.arange(first_step, first_step + len(ordered), dtype=np.int64)[:, None], ordered.shape)
    return rows[keep], ordered[keep]


def access_stream(dataset: DatasetShape, plans_per_epoch: Iterator[list[NDArray[np.int64]]],
                  nodes: int) -> list[AccessStream]:
    """Every node's access stream over the epochs (``plans_per_epoch`` yields each epoch's node plans, as shard
    ids: :func:`shard_of` applied to the sample plans)."""
    steps: list[list[NDArray[np.int64]]] = [[] for _ in range(nodes)]
    shards: list[list[NDArray[np.int64]]] = [[] for _ in range(nodes)]
    starts = [0]
    for plans in plans_per_epoch:
        count = 0
        for node, plan in enumerate(plans):
            per_step = step_samples(plan)
            count = len(per_step)
            s, k = _per_step_unique(per_step, starts[-1])
            steps[node].append(s)
            shards[node].append(k)
        starts.append(starts[-1] + count)
    return [AccessStream(np.concatenate(steps[n]) if steps[n] else np.zeros(0, np.int64),
                         np.concatenate(shards[n]) if shards[n] else np.zeros(0, np.int64), list(starts))
            for n in range(nodes)]
