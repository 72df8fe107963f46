"""Hook implementations of streaming-stratified: the stream-aware batching methods."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_batching_methods(registry: RegistryView) -> None:
    """Register ``stratified``, ``per_stream`` and ``device_per_stream``."""
    from streaming_stratified.methods import device_per_stream, per_stream, stratified
    registry.add('stratified', stratified)
    registry.add('per_stream', per_stream)
    registry.add('device_per_stream', device_per_stream)
