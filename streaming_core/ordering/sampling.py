"""Per-epoch resampling of streams into shuffle units (runtime.md section 1.5), bit-exact with the reference.

A stream that chooses ``c`` samples out of its ``n`` is read ``c // n`` whole times plus a partial repeat of
``c % n`` samples. :func:`get_sampling` decides how many samples each *shard* contributes; :func:`resample`
turns those counts into the epoch's *shuffle units* (virtual shards, one per whole or partial repeat of a shard)
and the map from the epoch's *big* sample IDs (positions in the concatenation of the units) to the underlying
*small* (global) sample IDs.

:class:`Resampled` keeps that map compact (one row per unit plus the partial picks), so mapping the few IDs a
node reads costs O(those IDs), never O(epoch); :meth:`Resampled.small_per_big` materialises the reference's array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ['get_sampling', 'Resampled', 'resample']

_CHUNK = 1 << 22  # IDs mapped per vectorised step (bounds the temporaries of to_small)


def _check_non_negative(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f'`{name}` must be non-negative, got {value}.')


def get_sampling(samples_per_shard: NDArray[np.int64] | list[int], choose: int, granularity: int, seed: int,
                 epoch: int, use_epoch: bool) -> NDArray[np.int64]:
    """How many samples each shard contributes when a stream chooses ``choose`` samples.

    Every shard gets ``choose // n`` times its size (``n`` = the stream's sample count). The remainder
    ``choose % n`` is shared out in *picks* of ``granularity`` samples (a shard's last pick is shorter): the picks
    are walked in the order of ``default_rng(seed + epoch if use_epoch else seed).permutation(num_picks)``, each
    taking ``min(remaining, pick size)`` samples, until the remainder is used up.

    Args:
        samples_per_shard: The stream's shard sizes.
        choose: Samples to choose from the stream this epoch.
        granularity: Pick size in samples (> 0); larger picks read fewer shards partially.
        seed: The shuffle seed (>= 0).
        epoch: The epoch (>= 0).
        use_epoch: Vary the picks per epoch (the reference's ``epoch_seed_change``).

    Returns:
        int64 samples to choose per shard (sums to ``choose``; each within ``[0, (choose//n + 1) * size]``).

    Raises:
        ValueError: ``choose``, ``seed`` or ``epoch`` negative, ``granularity`` not positive, or a stream with no
            samples asked for samples.
    """
    _check_non_negative('choose', choose)
    if granularity <= 0:
        raise ValueError(f'`sampling_granularity` must be positive, got {granularity}.')
    _check_non_negative('seed', seed)
    _check_non_negative('epoch', epoch)
    sizes = np.asarray(samples_per_shard, dtype=np.int64)
    if sizes.ndim != 1 or (sizes < 0).any():
        raise ValueError('`samples_per_shard` must be a 1-D array of non-negative shard sizes.')
    total = int(sizes.sum())
    if total == 0:
        if choose:
            raise ValueError(f'Cannot choose {choose} samples from a stream that has no samples.')
        return np.zeros_like(sizes)
    if choose % total == 0:
        return sizes * (choose // total)
    out = sizes * (choose // total)
    remainder = choose % total
    picks_per_shard = (sizes + granularity - 1) // granularity
    num_picks = int(picks_per_shard.sum())
    pick_shard = np.repeat(np.arange(len(sizes)), picks_per_shard)
    pick_sizes = np.full(num_picks, granularity, np.int64)
    last_pick = np.cumsum(picks_per_shard)[picks_per_shard > 0] - 1
    pick_sizes[last_pick] = sizes[picks_per_shard > 0] - granularity * (picks_per_shard[picks_per_shard > 0] - 1)
    rng = np.random.default_rng(seed + epoch if use_epoch else seed)
    order = rng.permutation(num_picks)
    walked = pick_sizes[order]
    before = np.cumsum(walked) - walked
    taken = np.clip(remainder - before, 0, walked)
    out += np.bincount(pick_shard[order], weights=taken, minlength=len(sizes)).astype(np.int64)
    return out


@dataclass
class Resampled:
    """One epoch's shuffle units and the compact big-to-small sample ID map.

    Attributes:
        units: Size of each shuffle unit, in (stream, shard, repeat) order; sums to the epoch size.
        unit_big_start: Big ID of each unit's first sample (exclusive prefix sum of ``units``).
        unit_small_start: Small ID of the unit's shard's first sample (for whole units).
        unit_partial_start: Offset of the unit's picks in ``partial`` (``-1`` for whole units).
        partial: The sorted picks of every partial unit, concatenated (small IDs).
    """

    units: NDArray[np.int64]
    unit_big_start: NDArray[np.int64]
    unit_small_start: NDArray[np.int64]
    unit_partial_start: NDArray[np.int64]
    partial: NDArray[np.int64]

    @property
    def size(self) -> int:
        """The number of big IDs (the epoch size, or one stream's choose)."""
        return int(self.units.sum())

    @property
    def is_identity(self) -> bool:
        """Whether big ID ``i`` is small ID ``i`` for every ``i``: each shard read exactly once, in order."""
        return (not len(self.partial) and bool((self.unit_big_start == self.unit_small_start).all()))

    def small_per_big(self) -> NDArray[np.int64]:
        """The reference's ``small_per_big`` array (O(epoch) memory)."""
        return self.to_small(np.arange(self.size, dtype=np.int64))

    def to_small(self, big: NDArray[np.integer], out: NDArray[np.int64] | None = None) -> NDArray[np.int64]:
        """Map big IDs to small IDs; ``-1`` stays ``-1``. Works in bounded chunks; ``out`` may alias ``big``."""
        big = np.asarray(big)
        if out is None:
            out = np.empty(big.shape, np.int64)
        flat_in = big.reshape(-1)
        flat_out = out.reshape(-1)
        identity = self.is_identity
        for lo in range(0, flat_in.size, _CHUNK):
            ids = flat_in[lo:lo + _CHUNK].astype(np.int64, copy=False)
            if identity:
                flat_out[lo:lo + _CHUNK] = ids
                continue
            pad = ids < 0
            safe = np.where(pad, 0, ids)
            unit = np.searchsorted(self.unit_big_start, safe, side='right') - 1
            within = safe - self.unit_big_start[unit]
            small = self.unit_small_start[unit] + within
            pstart = self.unit_partial_start[unit]
            is_part = pstart >= 0
            if is_part.any():
                small[is_part] = self.partial[pstart[is_part] + within[is_part]]
            small[pad] = -1
            flat_out[lo:lo + _CHUNK] = small
        return out


def resample(samples_per_shard: NDArray[np.int64], shards_per_stream: NDArray[np.int64],
             choose_per_stream: NDArray[np.int64], seed: int, epoch: int, *, sampling_method: str = 'balanced',
             granularity: int = 1, epoch_seed_change: bool = False, stream_id: int | None = None) -> Resampled:
    """Resample all streams (``stream_id=None``) or one stream for ``epoch`` (the reference's ``resample_streams``).

    One rng per call, ``default_rng(seed + epoch)`` for ``balanced`` else ``default_rng(seed)``, draws the partial
    repeats (``sort(rng.choice(size, c % size, replace=False))``) in stream/shard order. Per shard the units are
    ``c // size`` whole copies then the partial one. Small IDs are global (offset by the earlier streams' shards)
    even when resampling a single stream.

    Raises:
        ValueError: An unknown ``sampling_method``, an out-of-range ``stream_id``, or inconsistent tables.
    """
    if sampling_method not in ('balanced', 'fixed'):
        raise ValueError(f"Invalid sampling method: {sampling_method!r}. Must be 'balanced' or 'fixed'.")
    sizes = np.asarray(samples_per_shard, np.int64)
    per_stream = np.asarray(shards_per_stream, np.int64)
    chooses = np.asarray(choose_per_stream, np.int64)
    if int(per_stream.sum()) != len(sizes) or len(per_stream) != len(chooses):
        raise ValueError(f'Inconsistent stream tables: {len(sizes)} shards, shards_per_stream sums to '
                         f'{int(per_stream.sum())}, {len(chooses)} choose values for {len(per_stream)} streams.')
    if stream_id is not None and not 0 <= stream_id < len(per_stream):
        raise ValueError(f'stream_id {stream_id} is out of range for {len(per_stream)} streams.')
    rng = np.random.default_rng(seed + epoch if sampling_method == 'balanced' else seed)
    shard_offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    stream_first = np.concatenate([[0], np.cumsum(per_stream)]).astype(np.int64)
    units_l, small_l, pstart_l, partial_l = [], [], [], []
    partial_total = 0
    streams = range(len(per_stream)) if stream_id is None else [stream_id]
    for sid in streams:
        lo, hi = int(stream_first[sid]), int(stream_first[sid + 1])
        ssizes = sizes[lo:hi]
        choose = get_sampling(ssizes, int(chooses[sid]), granularity, seed, epoch, epoch_seed_change)
        nonempty = ssizes > 0
        whole = np.where(nonempty, choose // np.maximum(ssizes, 1), 0)
        part = np.where(nonempty, choose % np.maximum(ssizes, 1), 0)
        count = whole + (part > 0)
        first = np.cumsum(count) - count
        num = int(count.sum())
        units = np.repeat(ssizes, count)
        small = np.repeat(shard_offsets[lo:hi], count)
        pstart = np.full(num, -1, np.int64)
        for k in np.flatnonzero(part):
            size, c = int(ssizes[k]), int(part[k])
            picks = np.sort(rng.choice(size, c, replace=False)).astype(np.int64) + shard_offsets[lo + k]
            index = first[k] + whole[k]
            units[index] = c
            pstart[index] = partial_total
            partial_total += c
            partial_l.append(picks)
        units_l.append(units)
        small_l.append(small)
        pstart_l.append(pstart)
    units = np.concatenate(units_l).astype(np.int64) if units_l else np.zeros(0, np.int64)
    big_start = (np.cumsum(units) - units).astype(np.int64)
    return Resampled(units, big_start, np.concatenate(small_l).astype(np.int64),
                     np.concatenate(pstart_l).astype(np.int64),
                     np.concatenate(partial_l).astype(np.int64) if partial_l else np.zeros(0, np.int64))
