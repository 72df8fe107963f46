"""``streaming.base.converters.dataframe_to_mds``: the reference's module path of its Spark converter."""

from __future__ import annotations

from typing import Any

from streaming_core.tools.spark import dataframe_to_mds

__all__ = ['dataframe_to_mds']  # and, on first use, the package's infer_dataframe_schema, is_json_compatible


def __getattr__(name: str) -> Any:
    if name in ('infer_dataframe_schema', 'is_json_compatible', 'SPARK_TO_MDS'):
        import streaming.base.converters as package
        return getattr(package, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
