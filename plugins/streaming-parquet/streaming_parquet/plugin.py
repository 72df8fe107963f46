"""Hook implementations of streaming-parquet: the ``parquet`` index builder and shard format."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register the ``parquet`` shard format."""
    from streaming_parquet.reader import ParquetFormat
    registry.add('parquet', ParquetFormat())


@hookimpl
def register_index_builders(registry: RegistryView) -> None:
    """Register the ``parquet`` index builder (``*.parquet`` files)."""
    from streaming_parquet.builder import ParquetIndexBuilder
    registry.add('parquet', ParquetIndexBuilder())
