"""PNG plots of a simulation (matplotlib's Agg canvas; pyplot and the global backend are never touched).

* ``downloads.png``: cumulative shard downloads per node over the run's steps, one panel per algorithm;
* ``cache.png``: bytes in each node's cache over the run (index included), with the cache limit;
* ``timeline.png``: wall-clock time at each step against the compute-only time (the gap is time lost waiting);
* ``quality.png``: shuffle quality per algorithm (see :mod:`streaming_core.tools.simulation.quality`).

At most :data:`MAX_NODES_SHOWN` nodes are drawn per panel (the first ones); curves are thinned to a few thousand
points.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.tools.simulation.run import AlgoResult, SimulationResult

__all__ = ['write_plots', 'MAX_NODES_SHOWN']

MAX_NODES_SHOWN = 8
_POINTS = 4000


def _figure(rows: int, height: float = 2.8) -> tuple[Any, Sequence[Any]]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError('Plots need matplotlib: pip install "streaming-core[simulate]" (or leave out --out).') \
            from err
    figure = Figure(figsize=(10, 1.2 + height * rows), layout='constrained')
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, 1, squeeze=False)[:, 0]
    return figure, list(axes)


def _thin(x: NDArray[Any], y: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    if len(x) <= _POINTS:
        return x, y
    keep = np.unique(np.linspace(0, len(x) - 1, _POINTS).astype(np.int64))
    return x[keep], y[keep]


def _scale(values: float) -> tuple[float, str]:
    for unit, factor in (('TiB', 1 << 40), ('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if values >= factor:
            return float(factor), unit
    return 1.0, 'B'


def _epochs(ax: Any, algo: AlgoResult) -> None:
    for start in algo.epoch_starts[1:-1]:
        ax.axvline(start, color='0.6', linestyle=':', linewidth=1)


def _title(algo: AlgoResult) -> str:
    return f'{algo.algo} (NCN {algo.num_canonical_nodes}, block {algo.shuffle_block_size})'


def _downloads(result: SimulationResult, path: str) -> None:
    figure, axes = _figure(len(result.algos))
    for ax, algo in zip(axes, result.algos):
        for node in algo.nodes[:MAX_NODES_SHOWN]:
            steps = np.append(node.fetched.steps, algo.steps)
            counts = np.append(np.arange(1, node.downloads + 1), node.downloads)
            x, y = _thin(steps, counts)
            ax.step(x, y, where='post', label=f'node {node.node}', linewidth=1)
        _epochs(ax, algo)
        ax.set_title(_title(algo) + ': shard downloads')
        ax.set_ylabel('downloads')
        ax.set_xlim(0, max(algo.steps, 1))
        ax.legend(loc='lower right', fontsize='small', ncol=4)
    axes[-1].set_xlabel('step')
    figure.savefig(path, dpi=100)


def _cache(result: SimulationResult, path: str) -> None:
    figure, axes = _figure(len(result.algos))
    index = result.dataset.index_bytes
    limit = result.training.cache_limit
    peak = max([n.peak_cache_bytes for a in result.algos for n in a.nodes] + [limit or 0, 1])
    factor, unit = _scale(peak)
    for ax, algo in zip(axes, result.algos):
        for node in algo.nodes[:MAX_NODES_SHOWN]:
            steps = np.concatenate([[0], node.fetched.steps, [algo.steps]])
            used = np.concatenate([[index], node.fetched.occupancy + index,
                                   [node.fetched.occupancy[-1] + index if node.downloads else index]])
            x, y = _thin(steps, used / factor)
            ax.step(x, y, where='post', label=f'node {node.node}', linewidth=1)
        if limit:
            ax.axhline(limit / factor, color='red', linestyle='--', linewidth=1, label='cache limit')
        _epochs(ax, algo)
        ax.set_title(_title(algo) + ': cache occupancy per node')
        ax.set_ylabel(unit)
        ax.set_xlim(0, max(algo.steps, 1))
        ax.legend(loc='lower right', fontsize='small', ncol=4)
    axes[-1].set_xlabel('step')
    figure.savefig(path, dpi=100)


def _timeline(result: SimulationResult, path: str) -> None:
    figure, axes = _figure(len(result.algos))
    c = result.training.step_seconds
    for ax, algo in zip(axes, result.algos):
        t = algo.timeline
        steps = np.concatenate([t.event_steps, [algo.steps]])
        last_step = int(t.event_steps[-1]) if len(t.event_steps) else -1
        last_start = float(t.event_start[-1]) if len(t.event_start) else -c
        start = np.concatenate([t.event_start, [last_start + (algo.steps - last_step) * c]])
        x, y = _thin(steps, start)
        ax.plot(x, y, label='simulated', linewidth=1.2)
        ax.plot([0, algo.steps], [0, algo.steps * c], linestyle='--', color='0.5', label='compute only')
        _epochs(ax, algo)
        ax.set_title(f'{_title(algo)}: time ({t.stalled_steps} steps waited for downloads, '
                     f'{t.stall_seconds:.1f} s lost; startup {t.startup_seconds:.1f} s)')
        ax.set_ylabel('seconds')
        ax.set_xlim(0, max(algo.steps, 1))
        ax.legend(loc='upper left', fontsize='small')
    axes[-1].set_xlabel('step')
    figure.savefig(path, dpi=100)


def _quality(result: SimulationResult, path: str) -> None:
    figure, axes = _figure(1, height=3.5)
    ax = axes[0]
    names = [a.algo for a in result.algos]
    values = [a.quality.quality for a in result.algos]
    colors = ['tab:blue' if a.ranked else '0.6' for a in result.algos]
    bars = ax.bar(names, values, color=colors)
    for bar, algo in zip(bars, result.algos):
        note = '' if algo.ranked else '\nnot ranked'
        ax.annotate(f'{algo.quality.quality:.3f}\n(same shard {algo.quality.same_shard_rate:.1%}){note}',
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha='center', va='bottom',
                    fontsize='small')
    ax.set_ylim(0, 1.35)
    ax.axhline(1.0, color='0.5', linestyle=':', linewidth=1)
    ax.set_ylabel('shuffle quality (1 = perfect shuffle)')
    ax.set_title('Shuffle quality: how random the shard mix of a device batch is (0 = one shard, or a fixed mix; '
                 '1 = random)', fontsize='medium')
    figure.savefig(path, dpi=100)


def write_plots(result: SimulationResult, out_dir: str) -> list[str]:
    """Write the four PNG files into ``out_dir`` (created if needed); returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, draw in (('downloads.png', _downloads), ('cache.png', _cache), ('timeline.png', _timeline),
                       ('quality.png', _quality)):
        path = os.path.join(out_dir, name)
        draw(result, path)
        paths.append(path)
    return paths
