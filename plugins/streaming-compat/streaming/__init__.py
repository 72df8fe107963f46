"""mosaicml-streaming 0.13's public API, running on the streaming-core engine.

Install the distribution ``streaming-compat`` *instead of* ``mosaicml-streaming``: code that says
``from streaming import StreamingDataset, Stream, MDSWriter`` then runs unchanged on streaming-core. Every name here
is a thin adapter over the engine (``streaming.StreamingDataset`` is a subclass of
:class:`streaming_core.StreamingDataset`). Importing this package with mosaicml-streaming also installed is an error
(both provide ``streaming``). Differences kept on purpose are listed in the migration guide (docs/migrating.md).
"""

from __future__ import annotations

import importlib
from typing import Any

from streaming._conflict import check_no_reference

check_no_reference()

#: The reference API version this package provides (code that checks ``streaming.__version__`` sees 0.13.0).
__version__ = '0.13.0'
#: The version of the streaming-compat distribution itself.
compat_version = '0.1.0'
#: Marks this ``streaming`` as the streaming-compat adapter (harnesses use it to tell it from the reference).
ENGINE = 'streaming-core'

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
_SUBPACKAGES = ('base', 'vision', 'text', 'multimodal')

__all__ = ['StreamingDataLoader', 'Stream', 'StreamingDataset', 'CSVWriter', 'JSONWriter', 'MDSWriter', 'TSVWriter',
           'XSVWriter', 'LocalDataset', 'multimodal', 'vision', 'text']


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        value = importlib.import_module(f'{__name__}.{name}')
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, '__version__', 'compat_version', 'ENGINE'])
