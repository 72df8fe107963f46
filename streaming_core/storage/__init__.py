"""Storage: the facade over storage plugins, URLs, clients, retries, redaction, locks, hashing and compression.

``streaming_core.storage`` was one module before the core was laid out in wings; its names still resolve here
(lazily, from :mod:`streaming_core.storage.facade`) for code that imported them from the old path.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import importlib
    facade = importlib.import_module('streaming_core.storage.facade')
    try:
        return getattr(facade, name)
    except AttributeError:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}') from None
