"""streaming-webdataset: read directories of WebDataset ``.tar`` shards as streaming-core streams, with no
``index.json`` and no conversion.

The ``webdataset`` index builder walks each tar's headers with ranged reads (or reads ``webdataset-index.json``,
written by ``streaming index DIR``) and derives the index; the ``webdataset`` shard format opens a downloaded tar and
returns its samples as dicts (``__key__``, ``__url__`` and one item per member).
"""

from streaming_webdataset.builder import SIDECAR, WebDatasetIndexBuilder
from streaming_webdataset.reader import WebDatasetFormat, WebDatasetReader, WebDatasetView, decode_sample
from streaming_webdataset.tarscan import TarLayoutError

__all__ = ['SIDECAR', 'WebDatasetIndexBuilder', 'WebDatasetFormat', 'WebDatasetReader', 'WebDatasetView',
           'decode_sample', 'TarLayoutError']
