"""Shuffle quality: how random the shard mix of a device batch is, against a uniformly random order.

Shards are written in source order, so samples of one shard tend to be alike (the same document, class, crawl or
time). A shuffle's job is to make each device batch a random draw from the dataset. For every device batch of
epoch 0 (padding skipped) let ``c_k`` be how many of its ``n`` samples come from shard ``k``; shard ``k`` holds
``s_k`` of the ``N`` samples (``p_k = s_k / N``). The spread of those counts around the shard's share ``n * p_k``
tells orders apart:

* ``V = sum_k (c_k - n p_k)^2``, summed over the batches (``sum_k c_k^2 = n + 2 * same-shard pairs``, so ``V``
  comes from counting the pairs of samples that share a shard);
* ``V_random = n (1 - sum p_k^2) (N - n) / (N - 1)`` per batch: its expectation for a uniformly random order;
* ``V_max = n^2 (1 - sum p_k^2)`` per batch: every batch from a single shard (**clumped**), the largest it can be;
* ``V = 0``: every batch holds each shard in its exact share (**rigid**): the mix is fixed by the plan, not drawn.

``dispersion = V / V_random`` is 1.0 for a random order, above 1 for a clumped one, below 1 for a rigid one, and

    **quality** = ``min(V / V_random, (V_max - V) / (V_max - V_random))``, clipped to ``[0, 1]``:

1.0 when batches vary exactly as much as under a perfect shuffle, falling linearly to 0.0 at either extreme. On the
clumped side it is, up to the sampling of batches, ``(1 - same_shard_rate) / (1 - random_rate)``
(``same_shard_rate`` = same-shard pairs / all pairs; ``random_rate = sum(s_k (s_k - 1)) / (N (N - 1))``, its value
for a random order): reading in order (``none``), or ``py1s`` with one canonical node per node, scores about 0 once
a batch fits in a shard; ``py1e`` with blocks of ``b`` samples over shards of ``S`` samples about ``1 - S/b``;
``naive`` about 1. The rigid side is what more canonical nodes than shards produce: each canonical node then reads a
fixed piece of one shard and every batch takes the same quota from each, which makes fewer same-shard pairs than a
random order (the old score, the clumped-side formula alone, went *above* 1.0 there and ranked such an interleave
best). No order scores above 1.0.

A random order also looks random over several consecutive batches of a device, so the same score is taken over
windows of 1, 2, 4 and 8 consecutive batches, and the **worst** is reported (``window_batches`` says which): an
order that alternates shards batch by batch, or reads each shard's samples in turn a few batches apart, cannot hide
behind a well-mixed single batch. A longer window counts only when there are enough of them for a stable estimate
(:data:`MIN_FREEDOM`); the estimate's noise is then a few percent, so a perfect shuffle scores 0.95-1.0 on small
runs. With a batch of one sample (no pairs), windows start at two consecutive samples of each device. On large runs
the counts are taken from a random subset of 131 072 windows per length. With a single shard, or shards of one
sample each, every order has the same shard mix and scores 1.0: the measure cannot tell orders apart there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streaming_core.tools.simulation.access import device_streams

#: Window lengths measured, in consecutive batches of a device: 1, 2, 4, ... ``2 ** (SCALES - 1)``.
SCALES = 4
#: A longer scale is counted only with ``windows * (effective shards - 1)`` at least this (its degrees of freedom:
#: fewer leave the estimate noisier than about 3 %); the effective number of shards is ``1 / sum p_k^2``.
MIN_FREEDOM = 2000

__all__ = ['SCALES', 'MIN_FREEDOM', 'ShuffleQuality', 'BatchCounts', 'shuffle_quality', 'same_shard_pairs',
           'batch_counts', 'quality_from_counts']


@dataclass
class ShuffleQuality:
    """The measures of the module docstring.

    Attributes:
        quality: The score in ``[0, 1]`` (1 = as random as a perfect shuffle).
        same_shard_rate: Same-shard pairs / all pairs over the batches counted.
        random_rate: The same rate for a uniformly random order.
        dispersion: ``V / V_random`` over single batches: 1 random, above 1 clumped, below 1 rigid.
        window_batches: The consecutive batches of a device at which the score is lowest (``quality`` is that one).
    """

    quality: float
    same_shard_rate: float
    random_rate: float
    dispersion: float = 1.0
    window_batches: int = 1


@dataclass
class BatchCounts:
    """Sums over batches (``n`` = a batch's samples, ``c_k`` its samples from shard ``k``, ``p_k`` shard shares).

    Attributes:
        same: Same-shard pairs.
        pairs: All pairs.
        sum_n: Samples.
        sum_n2: Sum of ``n^2``.
        cross: Sum of ``n * sum_k p_k c_k``.
    """

    same: int = 0
    pairs: int = 0
    sum_n: int = 0
    sum_n2: int = 0
    cross: float = 0.0

    def add(self, other: 'BatchCounts') -> None:
        """Accumulate ``other`` into this one."""
        self.same += other.same
        self.pairs += other.pairs
        self.sum_n += other.sum_n
        self.sum_n2 += other.sum_n2
        self.cross += other.cross


def same_shard_pairs(shards: NDArray[np.int64]) -> tuple[int, int]:
    """``(same-shard pairs, all pairs)`` over the rows of a ``(windows, k)`` array of shard ids (``-1`` skipped)."""
    counts = batch_counts(shards, None)
    return counts.same, counts.pairs


def batch_counts(shards: NDArray[np.int64], shares: NDArray[np.float64] | None) -> BatchCounts:
    """The sums of :class:`BatchCounts` over the rows of a ``(windows, k)`` array of shard ids (``-1`` skipped);
    ``shares`` (each shard's fraction of the samples) is needed for ``cross`` only."""
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
    cross = 0.0
    if shares is not None:
        per_row = np.where(valid, shares[np.where(valid, ordered, 0)], 0.0).sum(axis=1)
        cross = float((count * per_row).sum())
    return BatchCounts(int(within.sum()), int((count * (count - 1) // 2).sum()), int(count.sum()),
                       int((count * count).sum()), cross)


def quality_from_counts(counts: BatchCounts, samples_per_shard: NDArray[np.int64]) -> ShuffleQuality:
    """The score of the batches summed in ``counts``, over shards of ``samples_per_shard`` samples (see the module
    docstring)."""
    sizes = np.asarray(samples_per_shard, np.float64)
    total = float(sizes.sum())
    rate = counts.same / counts.pairs if counts.pairs else 0.0
    if total <= 1:
        return ShuffleQuality(1.0, rate, 1.0, 1.0)
    share2 = float((sizes * sizes).sum()) / (total * total)  # sum p_k^2
    random_rate = float((sizes * (sizes - 1)).sum() / (total * (total - 1)))
    sum_n, sum_n2 = counts.sum_n, counts.sum_n2
    # V = sum over batches of sum_k (c_k^2 - 2 n p_k c_k + n^2 p_k^2), with sum_k c_k^2 = n + 2 same-shard pairs.
    observed = sum_n + 2 * counts.same - 2 * counts.cross + share2 * sum_n2
    # V_random = n (1 - sum p_k^2) (N - n) / (N - 1) per batch; V_max = n^2 (1 - sum p_k^2).
    expected = (1 - share2) * (total * sum_n - sum_n2) / (total - 1)
    largest = (1 - share2) * sum_n2
    if expected <= 0 or largest - expected <= 0:
        return ShuffleQuality(1.0, rate, random_rate, 1.0)
    dispersion = observed / expected
    quality = min(dispersion, (largest - observed) / (largest - expected))
    return ShuffleQuality(float(min(max(quality, 0.0), 1.0)), rate, random_rate, float(dispersion))


def _device_windows(plan: NDArray[np.int64], length: int) -> NDArray[np.int64]:
    """``(windows, length)``: each device's samples, in the order it receives them, cut into windows of ``length``
    consecutive samples (a device's last, shorter, window is dropped)."""
    stream = device_streams(plan)
    whole = stream.shape[1] // length * length
    return stream[:, :whole].reshape(-1, length)


def shuffle_quality(shard_plans: Sequence[NDArray[np.int64]], samples_per_shard: NDArray[np.int64],
                    max_windows: int = 1 << 17, seed: int = 0) -> ShuffleQuality:
    """Measure one epoch from its node plans ``(ranks, workers, batches, batch)`` of **shard ids** (see the module
    docstring): the worst score over windows of 1, 2, 4 and 8 consecutive batches of a device (a longer scale only
    when it has enough windows: :data:`MIN_FREEDOM`). At most ``max_windows`` windows per scale, drawn at random,
    are counted (the score is a ratio of sums)."""
    sizes = np.asarray(samples_per_shard, np.float64)
    shares = sizes / sizes.sum()
    extra_shards = 1 / float((shares * shares).sum()) - 1
    base = max(int(shard_plans[0].shape[-1]), 2) if shard_plans else 2
    rng = np.random.default_rng(seed)
    worst: ShuffleQuality | None = None
    for scale in range(SCALES):
        length = base << scale
        per_node = [_device_windows(plan, length) for plan in shard_plans]
        total = sum(len(w) for w in per_node)
        if scale and total * extra_shards < MIN_FREEDOM:
            break
        counts = BatchCounts()
        for windows in per_node:
            take = len(windows) if total <= max_windows else max(1, len(windows) * max_windows // total)
            if take < len(windows):
                windows = windows[np.sort(rng.choice(len(windows), take, replace=False))]
            counts.add(batch_counts(windows, shares))
        measured = quality_from_counts(counts, samples_per_shard)
        measured.window_batches = 1 << scale
        if worst is None:
            worst = measured
        elif measured.quality < worst.quality:
            worst.quality, worst.window_batches = measured.quality, measured.window_batches
    assert worst is not None
    return worst
