"""Simulate a training run's data loading: planning, downloads, cache, timing and shuffle quality per algorithm.

Nothing is downloaded but the optional ``index.json``: the order comes from the library's planning code, the data
path from a model (:mod:`~streaming_core.tools.simulation.cache`, :mod:`~streaming_core.tools.simulation.timing`).
Everything is vectorised numpy except the LRU walk (only when a node must evict) and the visit of steps that download.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.tools.simulation.access import (
    AccessStream,
    access_stream,
    epoch_plans,
    make_planner,
    make_world,
    shard_of,
)
from streaming_core.tools.simulation.cache import NodeDownloads, min_cache_bytes, node_downloads
from streaming_core.tools.simulation.quality import ShuffleQuality, shuffle_quality
from streaming_core.tools.simulation.shapes import NO_SHUFFLE, DatasetShape, TrainingShape
from streaming_core.tools.simulation.timing import Timeline, simulate_time

__all__ = ['NodeResult', 'AlgoResult', 'SimulationResult', 'simulate', 'order_warnings']


@dataclass
class NodeResult:
    """One node's numbers for one algorithm.

    Attributes:
        node: The node index.
        downloads: Shard downloads over the run.
        download_bytes: Bytes downloaded.
        shards_read: Distinct shards the node reads over the run.
        touched_bytes: Raw bytes of those shards.
        min_cache_bytes: The smallest cache limit that avoids re-downloads within an epoch (each shard kept from its
            first to its last read in the epoch: an ideal policy), index included.
        full_cache_bytes: The cache limit that never re-downloads, across epochs and under any eviction policy:
            ``touched_bytes`` plus the index. Never below ``min_cache_bytes``.
        peak_cache_bytes: The most the cache held, index included.
        busy_seconds: Time spent downloading.
        accesses: The node's access stream.
        fetched: The node's downloads.
    """

    node: int
    downloads: int
    download_bytes: int
    shards_read: int
    touched_bytes: int
    min_cache_bytes: int
    full_cache_bytes: int
    peak_cache_bytes: int
    busy_seconds: float
    accesses: AccessStream = field(repr=False)
    fetched: NodeDownloads = field(repr=False)

    def download_counts(self, num_shards: int) -> NDArray[np.int64]:
        """How many times each shard was downloaded by this node."""
        return np.bincount(self.fetched.shards, minlength=num_shards)

    def shards_accessed(self) -> NDArray[np.int64]:
        """The distinct shards the node reads."""
        return np.flatnonzero(np.bincount(self.accesses.shards))


@dataclass
class AlgoResult:
    """Everything simulated for one shuffle algorithm."""

    algo: str
    num_canonical_nodes: int
    shuffle_block_size: int
    steps: int
    epoch_starts: list[int]
    samples: int
    quality: ShuffleQuality
    timeline: Timeline
    nodes: list[NodeResult]
    warnings: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> bool:
        """Whether the order is a real shuffle of this world (no :attr:`warnings`), so it may be called the best."""
        return not self.warnings

    @property
    def total_downloads(self) -> int:
        """Downloads summed over nodes."""
        return sum(n.downloads for n in self.nodes)

    @property
    def throughput(self) -> float:
        """Samples per second over the whole run."""
        return self.samples / self.timeline.total_seconds if self.timeline.total_seconds > 0 else float('inf')

    def summary(self) -> dict[str, Any]:
        """The numbers as plain JSON-able values."""
        t = self.timeline
        return {
            'shuffle_algo': self.algo, 'num_canonical_nodes': self.num_canonical_nodes,
            'shuffle_block_size': self.shuffle_block_size, 'steps': self.steps, 'samples': self.samples,
            'quality': round(self.quality.quality, 6), 'same_shard_rate': round(self.quality.same_shard_rate, 6),
            'random_rate': round(self.quality.random_rate, 6), 'dispersion': round(self.quality.dispersion, 6),
            'warnings': list(self.warnings), 'ranked': self.ranked,
            'startup_seconds': t.startup_seconds, 'first_batch_seconds': t.first_batch_seconds,
            'total_seconds': t.total_seconds, 'throughput_samples_per_second': self.throughput,
            'stalled_steps': t.stalled_steps, 'stall_seconds': t.stall_seconds,
            'nodes': [{'node': n.node, 'downloads': n.downloads, 'download_bytes': n.download_bytes,
                       'shards_read': n.shards_read, 'touched_bytes': n.touched_bytes,
                       'min_cache_bytes': n.min_cache_bytes, 'full_cache_bytes': n.full_cache_bytes,
                       'peak_cache_bytes': n.peak_cache_bytes,
                       'busy_seconds': n.busy_seconds} for n in self.nodes],
        }


@dataclass
class SimulationResult:
    """The simulation of every requested algorithm."""

    dataset: DatasetShape
    training: TrainingShape
    algos: list[AlgoResult]
    warnings: list[str]
    seconds: float

    def by_algo(self, algo: str) -> AlgoResult:
        """The result of one algorithm."""
        for result in self.algos:
            if result.algo == algo:
                return result
        raise KeyError(f'No result for shuffle algorithm {algo!r}; simulated: {[r.algo for r in self.algos]}.')

    def summary(self) -> dict[str, Any]:
        """The whole result as plain JSON-able values."""
        t = self.training
        return {
            'dataset': {'source': self.dataset.source, 'samples': self.dataset.num_samples,
                        'shards': self.dataset.num_shards, 'raw_bytes': int(self.dataset.raw_bytes.sum()),
                        'download_bytes': int(self.dataset.download_bytes.sum()),
                        'index_bytes': self.dataset.index_bytes},
            'training': {'nodes': t.nodes, 'ranks_per_node': t.ranks_per_node, 'workers': t.workers,
                         'batch_size': t.batch_size, 'epochs': t.epochs, 'cache_limit': t.cache_limit,
                         'bandwidth': t.bandwidth, 'time_per_sample': t.time_per_sample,
                         'predownload': t.predownload, 'partition_algo': t.partition_algo,
                         'shuffle_seed': t.shuffle_seed},
            'algorithms': [a.summary() for a in self.algos],
            'warnings': list(self.warnings),
            'simulation_seconds': self.seconds,
        }


def order_warnings(dataset: DatasetShape, algo: str, num_canonical_nodes: int,
                   node_plans: list[NDArray[np.int64]]) -> list[str]:
    """Why an order is not a shuffle worth ranking: no shuffle at all, more canonical nodes than shards (each
    canonical node reads a fixed piece of one shard), or workers left without samples (the planner pads ranks by
    repeating samples, so a rank always gets some; a worker may get only padding). ``node_plans`` are epoch 0's
    plans ``(ranks, workers, batches, batch)``, ``-1`` for padding."""
    found = []
    if algo == NO_SHUFFLE:
        found.append('no shuffle (shuffle=False): every epoch reads the same order; not ranked')
    elif algo != 'naive' and num_canonical_nodes > dataset.num_shards:
        found.append(f'{num_canonical_nodes} canonical nodes for {dataset.num_shards} shards: each canonical node '
                     f'reads a fixed piece of one shard, so every batch takes a fixed share of each shard (an '
                     f'interleave, not a shuffle); use fewer canonical nodes than shards (a multiple of the '
                     f'physical nodes), or smaller shards')
    per_worker = np.concatenate([(plan >= 0).reshape(plan.shape[0] * plan.shape[1], -1).sum(axis=1)
                                 for plan in node_plans])
    empty = int((per_worker == 0).sum())
    if empty:
        found.append(f'{empty} of {len(per_worker)} DataLoader workers get no samples, only padding (the epoch has '
                     f'fewer batches than ranks x workers): too small a run to judge a shuffle')
    return found


def _simulate_algo(dataset: DatasetShape, training: TrainingShape, algo: str) -> AlgoResult:
    planner = make_planner(dataset, training, algo)
    world = make_world(training)
    measured: list[ShuffleQuality] = []
    flagged: list[str] = []

    def plans() -> Iterator[list[NDArray[np.int64]]]:
        ends = dataset.shard_ends
        for epoch in range(int(training.epochs)):
            node_plans = [shard_of(plan, ends) for plan in epoch_plans(planner, world, epoch)]
            if epoch == 0:
                measured.append(shuffle_quality(node_plans, dataset.samples_per_shard))
                flagged.extend(order_warnings(dataset, algo, planner.num_canonical_nodes, node_plans))
            yield node_plans

    streams = access_stream(dataset, plans(), int(training.nodes))
    budget = None if training.cache_limit is None else int(training.cache_limit) - dataset.index_bytes
    fetched = [node_downloads(stream, dataset.raw_bytes, budget) for stream in streams]
    total_steps = streams[0].total_steps
    timeline = simulate_time(fetched, dataset.download_bytes, total_steps, training.step_seconds,
                             training.lookahead_steps, training.bandwidth)
    nodes = []
    for node, (stream, down) in enumerate(zip(streams, fetched)):
        read = np.flatnonzero(np.bincount(stream.shards, minlength=dataset.num_shards))
        nodes.append(NodeResult(
            node=node, downloads=down.count, download_bytes=int(dataset.download_bytes[down.shards].sum()),
            shards_read=len(read), touched_bytes=int(dataset.raw_bytes[read].sum()),
            min_cache_bytes=min_cache_bytes(stream, dataset.raw_bytes) + dataset.index_bytes,
            full_cache_bytes=int(dataset.raw_bytes[read].sum()) + dataset.index_bytes,
            peak_cache_bytes=(int(down.occupancy.max()) if down.count else 0) + dataset.index_bytes,
            busy_seconds=timeline.busy_seconds[node], accesses=stream, fetched=down))
    return AlgoResult(algo, planner.num_canonical_nodes, planner.shuffle_block_size, total_steps,
                      streams[0].epoch_starts, dataset.num_samples * int(training.epochs), measured[0], timeline,
                      nodes, flagged)


def simulate(dataset: DatasetShape, training: TrainingShape) -> SimulationResult:
    """Simulate ``training`` on ``dataset`` for every algorithm of ``training.shuffle_algos``.

    Raises:
        CacheLimitError: the cache limit cannot hold the index and the largest shard.
        ValueError: a world shape the planner refuses (reported with the planner's message).
    """
    started = time.monotonic()
    warnings = training.check_cache(dataset)
    results = [_simulate_algo(dataset, training, algo) for algo in training.shuffle_algos]
    return SimulationResult(dataset, training, results, warnings, time.monotonic() - started)
