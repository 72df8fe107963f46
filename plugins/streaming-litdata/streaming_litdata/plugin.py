"""Hook implementations of streaming-litdata: the ``litdata`` shard format, the index builder that reads litdata's
``index.json`` in place, and ``streaming convert litdata``."""

from __future__ import annotations

from typing import Any

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``litdata`` shard format (one entry per litdata chunk)."""
    from streaming_litdata.reader import LitdataFormat
    registry.add('litdata', LitdataFormat())


@hookimpl
def register_index_builders(registry: RegistryView) -> None:
    """Register the ``litdata`` index builder (claims a directory whose ``index.json`` is litdata's)."""
    from streaming_litdata.builder import LitdataIndexBuilder
    registry.add('litdata', LitdataIndexBuilder())


def _add_converter(subparsers: Any) -> None:
    from streaming_litdata.convert import add_parser
    add_parser(subparsers)


@hookimpl
def register_converters(registry: RegistryView) -> None:
    """Register ``streaming convert litdata SRC OUT``."""
    registry.add('litdata', _add_converter)
