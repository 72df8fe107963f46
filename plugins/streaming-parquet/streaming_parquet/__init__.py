"""streaming-parquet: read directories of Parquet files as streaming-core streams, with no ``index.json``.

The ``parquet`` index builder reads each file's footer with ranged reads (schema, row groups, row counts) and
derives the index; the ``parquet`` shard format opens a downloaded file and decodes its rows.
"""

from streaming_parquet.builder import ParquetIndexBuilder
from streaming_parquet.reader import ParquetFormat, ParquetReader, ParquetView

__all__ = ['ParquetIndexBuilder', 'ParquetFormat', 'ParquetReader', 'ParquetView']
