"""Per-epoch planning: which sample each node, rank, worker and batch slot reads.

:class:`EpochPlanner` holds everything the order depends on (sample counts, stream weights, order arguments)
and is cheap to pickle. Batching methods receive it and combine its building blocks: resampling the streams
(:meth:`EpochPlanner.resample`), partitioning (:func:`streaming_core.partition.get_partitions`) and shuffling
(:meth:`EpochPlanner.shuffle_units`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from streaming_core.world import World

__all__ = ['EpochPlanner', 'random_batching', 'default_num_canonical_nodes', 'default_shuffle_block_size',
           'apply_weights']


def default_num_canonical_nodes(shuffle_algo: str, physical_nodes: int) -> int:
    """The reference's default: ``64 * nodes`` for ``py1s``/``py2s``, else the node count."""
    raise NotImplementedError


def default_shuffle_block_size(num_canonical_nodes: int) -> int:
    """The reference's default: ``max(4_000_000 // NCN, 1 << 18)``."""
    raise NotImplementedError


def apply_weights(proportions: list[float | None], repeats: list[float | None], chooses: list[int | None],
                  samples_per_stream: list[int], epoch_size: int | None,
                  seed: int) -> tuple[list[int], list[float], list[float], int]:
    """Resolve stream weights (runtime.md section 1.4): ``(choose, proportion, repeat, epoch_size)``."""
    raise NotImplementedError


@dataclass
class EpochPlanner:
    """The inputs of the sample order, and the building blocks batching methods use."""

    samples_per_shard: NDArray[np.int64]
    shards_per_stream: NDArray[np.int64]
    choose_per_stream: NDArray[np.int64]
    proportion_per_stream: NDArray[np.float64]
    epoch_size: int
    batch_size: int
    num_canonical_nodes: int
    shuffle: bool = False
    shuffle_algo: str = 'py1e'
    shuffle_seed: int = 9176
    shuffle_block_size: int = 1 << 18
    partition_algo: str = 'relaxed'
    batching_method: str = 'random'
    sampling_method: str = 'balanced'
    sampling_granularity: int = 1
    initial_physical_nodes: int | None = None
    extra: dict = field(default_factory=dict)

    def resample(self, epoch: int, stream_id: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """``(shuffle units, small_per_big)`` for the epoch (all streams, or one)."""
        raise NotImplementedError

    def shuffle_units(self, units: NDArray[np.int64], epoch: int, block_size: int | None = None) -> NDArray[np.int64]:
        """The configured shuffle of ``units`` for ``epoch``."""
        raise NotImplementedError

    def plan(self, world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
        """The whole parallel world's partition for ``epoch``: ``(PN, R, Wk, batches, B)`` small sample IDs."""
        raise NotImplementedError


def random_batching(planner: EpochPlanner, world: 'World', epoch: int, sample_in_epoch: int) -> NDArray[np.int64]:
    """The reference's ``random`` batching (runtime.md section 5.1)."""
    raise NotImplementedError
