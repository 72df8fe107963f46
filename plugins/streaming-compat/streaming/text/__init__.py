"""``streaming.text``: the reference's text datasets over the ``streaming-datasets`` recipes.

``StreamingC4`` and ``StreamingPile`` take the reference's ``tokenizer_name``, ``max_seq_len`` and ``group_method``
(``'truncate'``, the only method the reference implements): each sample is then the Hugging Face tokenizer's output
for the record's text, truncated and padded to ``max_seq_len``, as in the reference. Without ``tokenizer_name``
samples are the records themselves (the recipe's behaviour). ``StreamingEnWiki`` is the recipe's Wikipedia text
records; the reference's class reads pre-tokenized MLPerf BERT shards instead, which are not supported.
"""

from __future__ import annotations

from typing import Any

from streaming._recipes import REFERENCE_ORDER_DEFAULTS, compat_recipe
from streaming_datasets import text as _text

__all__ = ['StreamingC4', 'StreamingEnWiki', 'StreamingPile', 'Tokenize']


class Tokenize:
    """Tokenize a record's ``text`` with a Hugging Face tokenizer, truncated and padded to ``max_seq_len``
    (picklable: the tokenizer is loaded in each process on first use).

    Args:
        tokenizer_name: A name or path for ``transformers.AutoTokenizer.from_pretrained``.
        max_seq_len: Tokens per sample.
    """

    def __init__(self, tokenizer_name: str, max_seq_len: int) -> None:
        self.tokenizer_name = tokenizer_name
        self.max_seq_len = max_seq_len
        self._tokenizer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {'tokenizer_name': self.tokenizer_name, 'max_seq_len': self.max_seq_len, '_tokenizer': None}

    def __call__(self, record: dict[str, Any]) -> Any:
        """The tokenizer's output for ``record['text']``."""
        if self._tokenizer is None:
            from transformers import AutoTokenizer
            self._tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_name)
            if self._tokenizer.pad_token is None:
                self._tokenizer.pad_token = self._tokenizer.eos_token
        return self._tokenizer(record['text'], truncation=True, padding='max_length', max_length=self.max_seq_len)


def _tokenizing(name: str, recipe: type, doc: str) -> type:
    base = compat_recipe(name, recipe, REFERENCE_ORDER_DEFAULTS, doc)

    def __init__(self: Any, *, tokenizer_name: str | None = None, max_seq_len: int | None = None,
                 group_method: str = 'truncate', **kwargs: Any) -> None:
        if group_method != 'truncate':
            raise ValueError(f'{name}: group_method={group_method!r} is not supported; use \'truncate\' (the only '
                             f'method the reference implements), or streaming_datasets.StreamingPackedTokens for '
                             f'packed blocks.')
        if tokenizer_name is not None:
            if not isinstance(max_seq_len, int) or max_seq_len < 1:
                raise ValueError(f'{name}: max_seq_len must be a positive integer with tokenizer_name, got '
                                 f'{max_seq_len!r}.')
            if kwargs.get('transform') is not None:
                raise ValueError(f'{name}: pass either tokenizer_name or transform, not both.')
            kwargs['transform'] = Tokenize(tokenizer_name, max_seq_len)
        self.tokenizer_name = tokenizer_name
        self.max_seq_len = max_seq_len
        self.group_method = group_method
        base.__init__(self, **kwargs)

    __init__.__doc__ = base.__init__.__doc__
    return type(name, (base,), {'__init__': __init__, '__doc__': doc, '__module__': 'streaming.text'})


StreamingC4 = _tokenizing('StreamingC4', _text.StreamingC4, 'C4: records, or tokenized text with tokenizer_name.')
StreamingPile = _tokenizing('StreamingPile', _text.StreamingPile,
                            'The Pile: records, or tokenized text with tokenizer_name.')
StreamingEnWiki = compat_recipe('StreamingEnWiki', _text.StreamingEnWiki, REFERENCE_ORDER_DEFAULTS,
                                'English Wikipedia text records.')
