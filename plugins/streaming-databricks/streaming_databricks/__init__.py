"""Databricks storage for streaming-core: ``dbfs:/Volumes/...`` (Unity Catalog) and ``dbfs:/...`` (DBFS)."""

from __future__ import annotations

__all__ = ['DatabricksBackend', 'DbfsUrl', 'parse_dbfs_url']


def __getattr__(name: str) -> object:
    if name == 'DatabricksBackend':
        from streaming_databricks import backend
        return backend.DatabricksBackend
    if name in ('DbfsUrl', 'parse_dbfs_url'):
        from streaming_databricks import urls
        return getattr(urls, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
