"""streaming-litdata: read datasets written by litdata's ``optimize`` / ``BinaryWriter`` (its ``index.json`` with
``chunks`` and ``config``, and its chunk ``.bin`` files) through streaming-core's readers.

:func:`convert_index` turns litdata's ``index.json`` into streaming-core index entries of the ``litdata`` shard
format, whose reader decodes every item as litdata returns it.
"""

from streaming_litdata.builder import LitdataIndexBuilder, convert_index, is_litdata_index
from streaming_litdata.reader import LitdataFormat, LitdataReader, LitdataView

__all__ = ['LitdataIndexBuilder', 'convert_index', 'is_litdata_index', 'LitdataFormat', 'LitdataReader',
           'LitdataView']
