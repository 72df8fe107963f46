"""``streaming.multimodal``: the reference's WebVid datasets.

``StreamingInsideWebVid`` (videos stored inside the shards) is the ``streaming-datasets`` WebVid recipe, samples
``(video bytes, caption)``. The reference's ``StreamingOutsideGIWebVid`` and ``StreamingOutsideDTWebVid`` (videos
fetched from outside the shards while iterating) are not provided: constructing one raises ``NotImplementedError``
saying what to use instead.
"""

from __future__ import annotations

from streaming._recipes import compat_recipe, unsupported_recipe
from streaming_datasets import multimodal as _multimodal

__all__ = ['StreamingInsideWebVid', 'StreamingOutsideDTWebVid', 'StreamingOutsideGIWebVid']

StreamingInsideWebVid = compat_recipe('StreamingInsideWebVid', _multimodal.StreamingWebVid, {},
                                      'WebVid with the videos inside the shards: ``(video bytes, caption)``.')
_OUTSIDE = ('it downloads each video from outside the dataset while iterating. Convert with `streaming convert '
            'webvid` (videos inside the shards) and use StreamingInsideWebVid.')
StreamingOutsideGIWebVid = unsupported_recipe('StreamingOutsideGIWebVid', 'multimodal', _OUTSIDE)
StreamingOutsideDTWebVid = unsupported_recipe('StreamingOutsideDTWebVid', 'multimodal', _OUTSIDE)
