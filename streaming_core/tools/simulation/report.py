"""The text report of a simulation: the inputs, then one block of numbers per shuffle algorithm."""

from __future__ import annotations

from streaming_core.tools.simulation.run import AlgoResult, SimulationResult

__all__ = ['format_report', 'best_line', 'timing_line', 'human_bytes', 'human_seconds']


def human_bytes(count: float) -> str:
    """``1536`` -> ``'1.5 KiB'``."""
    value = float(count)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'):
        if abs(value) < 1024 or unit == 'PiB':
            return f'{int(value)} B' if unit == 'B' else f'{value:.1f} {unit}'
        value /= 1024
    return f'{value:.1f} PiB'


def human_seconds(seconds: float) -> str:
    """``4000`` -> ``'1 h 6 min'``; short times in seconds."""
    if seconds < 120:
        return f'{seconds:.2f} s'
    minutes, secs = divmod(seconds, 60)
    if minutes < 120:
        return f'{int(minutes)} min {int(secs)} s'
    hours, minutes = divmod(minutes, 60)
    return f'{int(hours)} h {int(minutes)} min'


def _spread(values: list[int], fmt: object = str) -> str:
    low, high = min(values), max(values)
    mean = sum(values) / len(values)
    show = fmt if callable(fmt) else str
    if low == high:
        return show(low)
    return f'{show(mean)} mean ({show(low)} to {show(high)})'


def _algo_block(algo: AlgoResult, epochs: int) -> list[str]:
    t = algo.timeline
    nodes = algo.nodes
    per_epoch = algo.steps // max(epochs, 1)
    lines = [
        f'== {algo.algo}: num_canonical_nodes {algo.num_canonical_nodes}, shuffle_block_size '
        f'{algo.shuffle_block_size}',
        f'   shuffle quality          {algo.quality.quality:.4f} (same-shard pairs per device batch '
        f'{algo.quality.same_shard_rate:.2%}, random order {algo.quality.random_rate:.2%}; shard mix '
        f'{_mix(algo.quality.dispersion)})',
        f'   steps                    {algo.steps} ({per_epoch} per epoch)',
        f'   startup time             {human_seconds(t.startup_seconds)} (until the first step\'s shards are in)',
        f'   time to first batch      {human_seconds(t.first_batch_seconds)}',
        f'   total time               {human_seconds(t.total_seconds)} ({algo.throughput:,.0f} samples/s)',
        f'   steps slowed by downloads {t.stalled_steps} ({human_seconds(t.stall_seconds)} lost)',
        f'   downloads per node       {_spread([n.downloads for n in nodes])}',
        f'   bytes per node           {_spread([n.download_bytes for n in nodes], human_bytes)}',
        f'   shards read per node     {_spread([n.shards_read for n in nodes])}',
        f'   peak cache per node      {_spread([n.peak_cache_bytes for n in nodes], human_bytes)}',
        f'   min cache, no re-download within an epoch   '
        f'{human_bytes(max(n.min_cache_bytes for n in nodes))} (worst node, index included)',
        f'   cache that never re-downloads (all shards a node reads) '
        f'{human_bytes(max(n.full_cache_bytes for n in nodes))} (worst node, index included)',
    ]
    lines.extend(f'   warning: {warning}' for warning in algo.warnings)
    return lines


def _mix(dispersion: float) -> str:
    """How the batches' shard mix compares with a random order's (see
    :mod:`~streaming_core.tools.simulation.quality`)."""
    if abs(dispersion - 1) < 0.05:
        return 'as random as a perfect shuffle'
    return f'{"clumped" if dispersion > 1 else "rigid"}, {dispersion:.2f} x a random order\'s variation'


def best_line(result: SimulationResult) -> str | None:
    """The comparison line of a run of several algorithms: the best quality among the ranked ones (a real shuffle
    of this world; see :attr:`~streaming_core.tools.simulation.run.AlgoResult.ranked`), and the fastest run."""
    if len(result.algos) < 2:
        return None
    fastest = min(result.algos, key=lambda a: a.timeline.total_seconds)
    ranked = [a for a in result.algos if a.ranked]
    if not ranked:
        return f'Best shuffle quality: none ranked (every configuration has a warning); fastest run: {fastest.algo}.'
    top = max(a.quality.quality for a in ranked)
    best = [a.algo for a in ranked if a.quality.quality >= top - 1e-9]
    return f'Best shuffle quality: {" = ".join(best)}; fastest run: {fastest.algo}.'


def timing_line(result: SimulationResult, wall_seconds: float | None = None, plot_seconds: float = 0.0) -> str:
    """``(simulated in ...)``, or with ``wall_seconds`` the whole command's time and its parts."""
    if wall_seconds is None:
        return f'(simulated in {human_seconds(result.seconds)})'
    parts = f'simulation {human_seconds(result.seconds)}'
    if plot_seconds:
        parts += f', plots {human_seconds(plot_seconds)}'
    return f'(took {human_seconds(wall_seconds)}: {parts})'


def format_report(result: SimulationResult, timing: bool = True) -> str:
    """The report printed by ``streaming simulate`` (``timing=False`` leaves out the closing time line, for a caller
    that prints the whole command's time itself with :func:`timing_line`)."""
    d, t = result.dataset, result.training
    lines = [
        f'Dataset:  {d.source}',
        f'          {d.num_samples} samples in {d.num_shards} shards, {human_bytes(int(d.raw_bytes.sum()))} raw, '
        f'{human_bytes(int(d.download_bytes.sum()))} to download; largest shard '
        f'{human_bytes(int(d.raw_bytes.max()))}',
        f'Training: {t.nodes} nodes x {t.ranks_per_node} ranks x {t.workers} workers, batch {t.batch_size} per '
        f'device, {t.epochs} epoch(s), predownload {t.predownload} ({t.lookahead_steps} steps ahead)',
        f'          bandwidth {human_bytes(t.bandwidth)}/s per node, {t.time_per_sample * 1000:g} ms per sample '
        f'({human_seconds(t.step_seconds)} per step), cache limit '
        f'{human_bytes(t.cache_limit) if t.cache_limit else "none"}',
    ]
    for warning in result.warnings:
        lines.append(f'Warning:  {warning}')
    for algo in result.algos:
        lines.append('')
        lines.extend(_algo_block(algo, int(t.epochs)))
    best = best_line(result)
    if best:
        lines += ['', best]
    if timing:
        lines.append(timing_line(result))
    return '\n'.join(lines)
