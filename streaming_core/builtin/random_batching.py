"""Builtin ``random`` batching: streams mixed through the shuffle (the reference's default)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_batching_methods(registry: RegistryView) -> None:
    """Register ``random``."""
    from streaming_core.ordering.planner import random_batching
    registry.add('random', random_batching)
