"""Builtin stream class: ``'stream'`` is :class:`~streaming_core.Stream` (``StreamingDataset(stream_name=...)``).

A plugin registers its own :class:`~streaming_core.Stream` subclasses the same way, through the ``register_streams``
hook.
"""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_core.reading.stream import Stream


@hookimpl
def register_streams(registry: RegistryView) -> None:
    """Register ``stream``."""
    registry.add('stream', Stream)
