"""Shuffle quality: how often the samples of one device batch come from the same shard, against a perfect shuffle.

Shards are written in source order, so samples of one shard tend to be alike (the same document, class, crawl or
time); a batch drawn from few shards gives correlated gradients. For every device batch of epoch 0 (padding
skipped) count the pairs of samples that come from the same shard:

* ``same_shard_rate`` = same-shard pairs / all pairs, over every device batch of the epoch;
* ``random_rate`` = the same rate for a uniformly random order: ``sum(s_k * (s_k - 1)) / (N * (N - 1))`` for shards
  of ``s_k`` samples and ``N`` samples in all;
* **quality** = ``(1 - same_shard_rate) / (1 - random_rate)``: about 1.0 for a perfect shuffle (``naive``), 0.0
  when every batch comes from a single shard (no shuffle, or ``py1s``, with batches smaller than shards), and in
  between for block shuffles: ``py1e`` with blocks of ``b`` samples over shards of ``S`` scores about ``1 - S/b``.

With a batch of one sample (no pairs), windows of two consecutive samples of each device are used instead. On
large runs the rate is estimated from a random subset of 131 072 batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streaming_core.simulation.access import device_streams

__all__ = ['ShuffleQuality', 'shuffle_quality', 'same_shard_pairs']


@dataclass
class ShuffleQuality:
    """The measures of the module docstring."""

    quality: float
    same_shard_rate: float
    random_rate: float


def same_shard_pairs(shards: NDArray[np.int64]) -> tuple[int, int]:
    """``(same-shard pairs, all pairs)`` over the rows of a ``(windows, k)`` array of shard ids (``-1`` skipped)."""
    ordered = np.sort(shards, axis=1)
    valid = ordered >= 0
    same = valid[:, 1:] & (ordered[:, 1:] == ordered[:, :-1])
    # Within a run of equal ids, the j-th element (0-based) pairs with the j earlier ones: sum j = sum c(c-1)/2.
    width = ordered.shape[1]
    index = np.broadcast_to(np.arange(1, width, dtype=np.int64), same.shape)
    starts = np.where(same, 0, index)
    run_start = np.maximum.accumulate(starts, axis=1)
    within = np.where(same, index - run_start, 0)
    count = valid.sum(axis=1).astype(np.int64)
    return int(within.sum()), int((count * (count - 1) // 2).sum())


def shuffle_quality(shard_plans: Sequence[NDArray[np.int64]], samples_per_shard: NDArray[np.int64],
                    max_windows: int = 1 << 17, seed: int = 0) -> ShuffleQuality:
    """Measure one epoch from its node plans ``(ranks, workers, batches, batch)`` of **shard ids** (see the module
    docstring). At most ``max_windows`` batches, drawn at random, are counted (the rate is an average)."""
    windows_per_node = []
    for plan in shard_plans:
        batch = plan.shape[-1]
        if batch >= 2:
            windows_per_node.append(plan.reshape(-1, batch))
        else:
            stream = device_streams(plan)
            windows_per_node.append(stream[:, :stream.shape[1] // 2 * 2].reshape(-1, 2))
    total_windows = sum(len(w) for w in windows_per_node)
    rng = np.random.default_rng(seed)
    same = pairs = 0
    for windows in windows_per_node:
        take = len(windows) if total_windows <= max_windows else max(1, len(windows) * max_windows // total_windows)
        if take < len(windows):
            windows = windows[np.sort(rng.choice(len(windows), take, replace=False))]
        s, p = same_shard_pairs(windows)
        same += s
        pairs += p
    sizes = samples_per_shard.astype(np.float64)
    total = float(sizes.sum())
    random_rate = float((sizes * (sizes - 1)).sum() / (total * (total - 1))) if total > 1 else 1.0
    rate = same / pairs if pairs else 0.0
    quality = (1.0 - rate) / (1.0 - random_rate) if random_rate < 1.0 else 1.0
    return ShuffleQuality(quality, rate, random_rate)
