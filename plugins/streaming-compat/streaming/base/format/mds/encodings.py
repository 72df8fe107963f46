"""``streaming.base.format.mds.encodings``: MDS column encodings, the ``streaming-mds`` plugin's codec registry.

Custom encodings are registered through streaming-core's plugin hook ``register_codecs`` (see the plugin author
guide), not by inserting into a module dict.
"""

from __future__ import annotations

from streaming_mds import get_mds_encoded_size, get_mds_encodings, is_mds_encoding, mds_decode, mds_encode
from streaming_mds.resolve import is_mds_encoding_safe

__all__ = ['get_mds_encoded_size', 'get_mds_encodings', 'is_mds_encoding', 'mds_decode', 'mds_encode',
           'is_mds_encoding_safe']
