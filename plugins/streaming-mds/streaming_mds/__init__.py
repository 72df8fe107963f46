"""The MDS shard format and its column encodings for streaming-core.

``from streaming_mds import MDSWriter`` writes datasets; reading goes through streaming-core's datasets, which
find the ``mds`` format registered by this plugin. Encodings are resolved by name through the ``codec`` registry:
see :mod:`streaming_mds.resolve`.
"""

from streaming_mds.resolve import (
                                   get_codec,
                                   get_mds_encoded_size,
                                   get_mds_encodings,
                                   is_mds_encoding,
                                   mds_decode,
                                   mds_encode,
)

__all__ = ['MDSWriter', 'get_codec', 'get_mds_encodings', 'is_mds_encoding', 'get_mds_encoded_size', 'mds_encode',
           'mds_decode']


def __getattr__(name: str):
    # The writer (and the core writer machinery) loads on first use: reading a dataset never needs it.
    if name == 'MDSWriter':
        from streaming_mds.writer import MDSWriter
        return MDSWriter
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return __all__
