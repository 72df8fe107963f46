"""Streaming classes of the multimodal recipes: LAION-400M (image-text) and WebVid (video-text).

LAION samples are ``(image, caption)`` with the image decoded to RGB; WebVid samples are ``(video, caption)`` with
the video as the file's bytes (decode them in ``transform``, e.g. with PyAV or torchvision.io, which this package
does not require). The stored records (``get_item``) carry the other fields: URLs, keys, metadata, durations.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from streaming_datasets.base import RecipeDataset, rgb

__all__ = ['StreamingLAION400M', 'StreamingWebVid']


class StreamingLAION400M(RecipeDataset):
    """LAION-400M (written by ``streaming convert laion400m``): samples are ``(image, caption)``.

    ``image`` is an RGB ``PIL.Image`` decoded from the downloaded file (``transform`` applies), ``caption`` a str
    (``target_transform`` applies).

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('image', 'caption')

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(image, caption)``."""
        from PIL import Image
        return self._apply(rgb(Image.open(io.BytesIO(raw['image']))), raw['caption'])


class StreamingWebVid(RecipeDataset):
    """WebVid (written by ``streaming convert webvid``): samples are ``(video, caption)``.

    ``video`` is the ``.mp4`` file's bytes (``transform`` applies: decode here), ``caption`` a str
    (``target_transform`` applies).

    Args:
        remote, local, split, transform, target_transform, transforms: See
            :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    required_columns = ('video', 'caption')

    def to_sample(self, raw: Mapping[str, Any]) -> tuple[Any, Any]:
        """``(video bytes, caption)``."""
        return self._apply(raw['video'], raw['caption'])
