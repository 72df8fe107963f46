"""Hook implementations of streaming-jsonl: shard format json."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_jsonl.reader import JSONFormat


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``json`` format."""
    registry.add('json', JSONFormat())
