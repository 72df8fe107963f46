"""Hook implementations of streaming-litdata: the ``litdata`` shard format."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``litdata`` shard format (one entry per litdata chunk)."""
    from streaming_litdata.reader import LitdataFormat
    registry.add('litdata', LitdataFormat())
