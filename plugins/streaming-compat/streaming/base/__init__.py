"""``streaming.base``: the reference's core package (datasets, streams, writers, storage, utilities)."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    'StreamingDataset': 'streaming.base.dataset',
    'Stream': 'streaming.base.stream',
    'StreamingDataLoader': 'streaming.base.dataloader',
    'LocalDataset': 'streaming.base.local',
    'MDSWriter': 'streaming.base.format',
    'JSONWriter': 'streaming.base.format',
    'CSVWriter': 'streaming.base.format',
    'TSVWriter': 'streaming.base.format',
    'XSVWriter': 'streaming.base.format',
}

_SUBMODULES = ('array', 'batching', 'compression', 'constant', 'converters', 'dataloader', 'dataset', 'distributed',
               'format', 'hashing', 'local', 'partition', 'registry_utils', 'sampling', 'shuffle', 'spanner', 'storage',
               'stream', 'util', 'world')

__all__ = ['StreamingDataLoader', 'Stream', 'StreamingDataset', 'CSVWriter', 'JSONWriter', 'LocalDataset',
           'MDSWriter', 'TSVWriter', 'XSVWriter']


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = importlib.import_module(f'{__name__}.{name}')
        globals()[name] = value
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
