"""streaming-parquet: read directories of Parquet files as streaming-core streams, with no ``index.json``.

The ``parquet`` index builder reads each file's footer with ranged reads (schema, row groups, row counts) and
derives the index; the ``parquet`` shard format opens a downloaded file and decodes its rows. :class:`ParquetStream`
adds a column projection, Hugging Face split selection, glob patterns and decoded images.
"""

from typing import Any

from streaming_parquet.builder import ParquetIndexBuilder
from streaming_parquet.reader import ParquetFormat, ParquetReader, ParquetView

__all__ = ['ParquetIndexBuilder', 'ParquetFormat', 'ParquetReader', 'ParquetView', 'ParquetStream']


def __getattr__(name: str) -> Any:
    """``ParquetStream`` loads on first use (it imports the core's ``Stream``)."""
    if name == 'ParquetStream':
        from streaming_parquet.stream import ParquetStream
        return ParquetStream
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
