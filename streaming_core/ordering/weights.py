"""Stream weights: how many samples each stream contributes to an epoch (runtime.md section 1.4).

Its own module so that a dataset resolves its weights at construction without importing the planner.
"""

from __future__ import annotations

import numpy as np

__all__ = ['apply_weights']


def _check_weight(kind: str, index: int, value: float | int | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f'Stream {index}: `{kind}` must be non-negative, got {value}.')


def apply_weights(proportions: list[float | None], repeats: list[float | None], chooses: list[int | None],
                  samples_per_stream: list[int], epoch_size: int | None,
                  seed: int) -> tuple[list[int], list[float], list[float], int]:
    """Resolve stream weights (runtime.md section 1.4): ``(choose, proportion, repeat, epoch_size)``.

    * **Relative** (every stream has ``proportion``): ``E = epoch_size or sum(samples)``; proportions are normalised,
      ``choose_i = floor(E * p_i)``, and the shortfall goes +1 to ``default_rng(seed).choice(streams, shortfall,
      replace=False)``.
    * **Unspecified with epoch_size**: the same with ``p_i = samples_i / sum(samples)``.
    * **Absolute** (``repeat``, ``choose`` or nothing; no ``epoch_size``): ``int(repeat * samples)``, ``choose`` or
      ``samples``; ``E`` is their sum.

    Returns:
        Per stream the chosen sample count, the derived proportion (relative: the normalised input, else
        ``choose/E``) and repeat (``choose/samples``), and the epoch size ``E``.

    Raises:
        ValueError: Mixed relative and absolute weights, ``epoch_size`` with absolute weights, more than one weight
            on a stream, a negative weight, or weights that choose nothing.
    """
    n = len(samples_per_stream)
    if not n or not len(proportions) == len(repeats) == len(chooses) == n:
        raise ValueError(f'apply_weights needs one proportion, repeat and choose entry per stream: got {n} streams, '
                         f'{len(proportions)} proportions, {len(repeats)} repeats, {len(chooses)} chooses.')
    for i, (p, r, c) in enumerate(zip(proportions, repeats, chooses, strict=True)):
        if sum(x is not None for x in (p, r, c)) > 1:
            raise ValueError(f'Stream {i}: at most one of `proportion`, `repeat`, and `choose` may be specified; '
                             f'the others are derived from it.')
        _check_weight('proportion', i, p)
        _check_weight('repeat', i, r)
        _check_weight('choose', i, c)
        if samples_per_stream[i] < 0:
            raise ValueError(f'Stream {i} has a negative sample count ({samples_per_stream[i]}).')
    if epoch_size is not None and epoch_size < 0:
        raise ValueError(f'Epoch size cannot be negative, got {epoch_size}.')
    samples = np.asarray(samples_per_stream, np.int64)
    relative = [p is not None for p in proportions]
    if any(relative) and not all(relative):
        raise ValueError('Relative (`proportion`) and absolute (`repeat`, `choose`, none) stream weights are '
                         'incompatible with each other. Give every stream a `proportion`, or give none of them one.')
    unspecified = all(r is None and c is None for r, c in zip(repeats, chooses, strict=True))
    if all(relative) or (unspecified and epoch_size):
        if all(relative):
            props = np.asarray(proportions, np.float64)
        else:
            props = samples.astype(np.float64)
        if not props.sum() > 0:
            raise ValueError('The stream proportions sum to 0: at least one stream needs a positive `proportion` '
                             '(or samples).')
        props = props / props.sum()
        total = int(epoch_size or int(samples.sum()))
        choose = (total * props).astype(np.int64)
        shortfall = total - int(choose.sum())
        picks = np.random.default_rng(seed).choice(n, shortfall, False)
        choose[picks] += 1
        proportion = props.tolist()
    else:
        if epoch_size:
            raise ValueError('Only provide `choose` when weighting streams relatively: `epoch_size` was given, but the '
                             'streams are weighted absolutely (`repeat`, `choose` or none), which fixes the epoch '
                             'size. Remove `epoch_size`, or give every stream a `proportion`.')
        values = []
        for r, c, s in zip(repeats, chooses, samples.tolist(), strict=True):
            values.append(int(r * s) if r is not None else int(c) if c is not None else s)
        choose = np.asarray(values, np.int64)
        total = int(choose.sum())
        if total == 0:
            raise ValueError('The stream weights choose 0 samples in total; at least one stream must contribute.')
        proportion = (choose / total).tolist()
    for i, s in enumerate(samples.tolist()):
        if s == 0 and choose[i]:
            raise ValueError(f'Stream {i} has no samples but is asked to contribute {int(choose[i])}.')
    repeat = [int(c) / s if s else 0.0 for c, s in zip(choose.tolist(), samples.tolist(), strict=True)]
    return [int(c) for c in choose.tolist()], [float(p) for p in proportion], repeat, total
