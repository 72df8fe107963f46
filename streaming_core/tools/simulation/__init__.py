"""The data-loading simulator behind ``streaming simulate``.

Give it a dataset shape (synthetic, or a real ``index.json``) and a training shape; it plans every epoch with the
library's own planning code, then models downloads, the node cache and step timing, and measures shuffle quality,
per shuffle algorithm. It never downloads a shard. Example::

    from streaming_core.tools.simulation import DatasetShape, TrainingShape, simulate, write_plots, format_report

    dataset = DatasetShape.synthetic(samples=10_000_000, shard_samples=2_000, sample_bytes=30_000)
    training = TrainingShape(nodes=4, ranks_per_node=8, workers=8, batch_size=32,
                             shuffle_algos=['py1e', 'py1br', 'naive'], cache_limit='200gb')
    result = simulate(dataset, training)
    print(format_report(result))
    write_plots(result, 'sim-plots')
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ['DatasetShape', 'TrainingShape', 'simulate', 'SimulationResult', 'AlgoResult', 'NodeResult',
           'format_report', 'write_plots', 'NO_SHUFFLE']

_LAZY = {
    'DatasetShape': 'streaming_core.tools.simulation.shapes',
    'TrainingShape': 'streaming_core.tools.simulation.shapes',
    'NO_SHUFFLE': 'streaming_core.tools.simulation.shapes',
    'simulate': 'streaming_core.tools.simulation.run',
    'SimulationResult': 'streaming_core.tools.simulation.run',
    'AlgoResult': 'streaming_core.tools.simulation.run',
    'NodeResult': 'streaming_core.tools.simulation.run',
    'format_report': 'streaming_core.tools.simulation.report',
    'write_plots': 'streaming_core.tools.simulation.plots',
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
