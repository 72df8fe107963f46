"""Hook implementations of streaming-py1e: the py1 shuffle family and the node-local ``py1n``."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shuffle_algorithms(registry: RegistryView) -> None:
    """Register ``py1e``, ``py1b``, ``py1br``, ``py1s``, ``py2s`` and ``py1n``."""
    from streaming_py1e.py1 import Py1b, Py1br, Py1e, Py1s
    from streaming_py1e.py1n import Py1n
    from streaming_py1e.py2s import Py2s
    for algo in (Py1e(), Py1b(), Py1br(), Py1s(), Py2s(), Py1n()):
        registry.add(algo.name, algo)
