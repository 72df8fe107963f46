"""Hook implementations of streaming-litdata: the ``litdata`` shard format and ``streaming convert litdata``."""

from __future__ import annotations

from typing import Any

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``litdata`` shard format (one entry per litdata chunk)."""
    from streaming_litdata.reader import LitdataFormat
    registry.add('litdata', LitdataFormat())


def _add_converter(subparsers: Any) -> None:
    from streaming_litdata.convert import add_parser
    add_parser(subparsers)


@hookimpl
def register_converters(registry: RegistryView) -> None:
    """Register ``streaming convert litdata SRC OUT``."""
    registry.add('litdata', _add_converter)
