"""Streaming classes of the text recipes: C4, The Pile and English Wikipedia.

Each sample is the document's record as a dict of strings (``transform`` applies to it, e.g. a tokenizer):
C4 ``{'text', 'timestamp', 'url'}``, Pile ``{'text', 'pile_set_name'}``, Wikipedia ``{'id', 'url', 'title',
'text'}``. For pretraining on token blocks, see :mod:`streaming_datasets.packing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming_datasets.base import RecipeDataset

__all__ = ['StreamingC4', 'StreamingPile', 'StreamingEnWiki', 'StreamingTextRecords']


class StreamingTextRecords(RecipeDataset):
    """A text dataset whose samples are its records (the stored columns listed in :attr:`fields`)."""

    pair = False
    #: The record's fields (also the required columns).
    fields: tuple[str, ...] = ('text',)
    required_columns = fields

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.required_columns = cls.fields

    def to_sample(self, raw: Mapping[str, Any]) -> Any:
        """The record (after ``transform``)."""
        record = {name: raw[name] for name in self.fields}
        return self.transform(record) if self.transform is not None else record


class StreamingC4(StreamingTextRecords):
    """C4 (written by ``streaming convert c4``): samples are ``{'text', 'timestamp', 'url'}``.

    Splits: ``train`` and ``val``.

    Args:
        remote, local, split, transform: See :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    fields = ('text', 'timestamp', 'url')


class StreamingPile(StreamingTextRecords):
    """The Pile (written by ``streaming convert pile``): samples are ``{'text', 'pile_set_name'}``.

    Splits: ``train``, ``val`` and ``test``.

    Args:
        remote, local, split, transform: See :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    fields = ('text', 'pile_set_name')


class StreamingEnWiki(StreamingTextRecords):
    """English Wikipedia (written by ``streaming convert enwiki``): samples are ``{'id', 'url', 'title', 'text'}``.

    Args:
        remote, local, split, transform: See :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`~streaming_core.reading.dataset.StreamingDataset` argument.
    """

    fields = ('id', 'url', 'title', 'text')
