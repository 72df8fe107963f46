"""Hook implementations of streaming-webdataset: the ``webdataset`` index builder, shard format and converter."""

from __future__ import annotations

from typing import Any

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``webdataset`` shard format."""
    from streaming_webdataset.reader import WebDatasetFormat
    registry.add('webdataset', WebDatasetFormat())


@hookimpl
def register_index_builders(registry: RegistryView) -> None:
    """Register the ``webdataset`` index builder (``*.tar`` files, ``webdataset-index.json``)."""
    from streaming_webdataset.builder import WebDatasetIndexBuilder
    registry.add('webdataset', WebDatasetIndexBuilder())


def _add_converter(subparsers: Any) -> None:
    from streaming_webdataset.convert import add_parser
    add_parser(subparsers)


@hookimpl
def register_converters(registry: RegistryView) -> None:
    """Register ``streaming convert webdataset SRC OUT``."""
    registry.add('webdataset', _add_converter)
