"""Hook implementations of streaming-hf: storage ``hf`` (the Hugging Face Hub)."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


def _hf_backend(**options: object) -> object:
    """Create an :class:`~streaming_hf.backend.HfBackend`."""
    from streaming_hf.backend import HfBackend
    return HfBackend(**options)


@hookimpl
def register_storage_backends(registry: RegistryView) -> None:
    """Register ``hf``."""
    registry.add('hf', _hf_backend)
