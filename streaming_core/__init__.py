"""streaming-core: stream training data from object storage into PyTorch, deterministically and resumably.

Importing this package is cheap: it discovers no plugin and imports no cloud SDK. The public names below are
loaded on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming_core import _moved

_moved.install()

__version__ = '0.1.0'

_LAZY = {
    'StreamingDataset': 'streaming_core.reading.dataset',
    'Stream': 'streaming_core.reading.stream',
    'StreamingDataLoader': 'streaming_core.reading.dataloader',
    'World': 'streaming_core.ordering.world',
    'LocalDataset': 'streaming_core.reading.local_dataset',
    'merge_index': 'streaming_core.writing.merge',
    'clean_stale_shared_memory': 'streaming_core.compat',
    'hookimpl': 'streaming_core.hookspecs',
    'get_registry': 'streaming_core.machinery.lookup',
}
# Writers live in their format plugins; these names resolve there for convenience.
_PLUGIN_NAMES = {
    'MDSWriter': 'streaming_mds',
    'JSONWriter': 'streaming_jsonl',
    'CSVWriter': 'streaming_csv',
    'TSVWriter': 'streaming_csv',
    'XSVWriter': 'streaming_csv',
}

__all__ = sorted([*_LAZY, *_PLUGIN_NAMES, '__version__'])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name) or _PLUGIN_NAMES.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as err:
        if name in _PLUGIN_NAMES and err.name == module:
            dist = module.replace('_', '-')
            raise ImportError(f'{name} is provided by the distribution {dist!r}, which is not installed: '
                              f'pip install {dist}') from err
        raise
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
