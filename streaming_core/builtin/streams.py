"""Builtin stream class: ``'stream'`` is :class:`~streaming_core.Stream` (``StreamingDataset(stream_name=...)``).

A plugin registers its own :class:`~streaming_core.Stream` subclasses the same way, through the ``register_streams``
hook; the hook is optional so this module loads with hook specifications that do not define it yet.
"""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_core.stream import Stream


@hookimpl(optionalhook=True)
def register_streams(registry: RegistryView) -> None:
    """Register ``stream``."""
    registry.add('stream', Stream)
