"""streaming-litdata: read datasets written by litdata's ``optimize`` / ``BinaryWriter`` (its ``index.json`` with
``chunks`` and ``config``, and its chunk ``.bin`` files, or ``.zstd.bin`` files for whole-file zstd chunks) through
streaming-core's readers. Compressed datasets (``compression='zstd'``, every ``compression_level``) need the zstd
codec of the ``streaming-compression`` distribution (``pip install streaming-litdata[zstd]``).

:func:`convert_index` turns litdata's ``index.json`` into streaming-core index entries of the ``litdata`` shard
format, whose reader decodes every item as litdata returns it.
"""

from streaming_litdata.builder import LitdataIndexBuilder, convert_index, is_litdata_index
from streaming_litdata.reader import LitdataFormat, LitdataReader, LitdataView

__all__ = ['LitdataIndexBuilder', 'convert_index', 'is_litdata_index', 'LitdataFormat', 'LitdataReader',
           'LitdataView']
