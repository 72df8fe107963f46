"""Streaming token blocks for LLM pretraining: pre-packed (exact everywhere) or packed on the fly (one process).

:class:`StreamingPackedTokens` reads what :func:`~streaming_datasets.tokens.convert_packed_tokens` wrote: one
block per sample, so it is a plain :class:`StreamingDataset` for ordering, sharding and ``state_dict``: resumption
is exact to the block on any number of nodes, ranks and DataLoader workers.

:class:`PackedTokenStream` packs the documents of any :class:`StreamingDataset` while iterating (tokenizing a
``text`` column, or reading a pre-tokenized ``tokens`` column). Its resumption is exact too, under a documented
condition: it must be iterated in the process that checkpoints it, on a single rank (``num_workers=0``, world size
1), because a block can span documents and only that process knows where the next block starts. Its
:meth:`~PackedTokenStream.state_dict` records the position of the first token of the next block: the underlying
dataset's state at the document holding it, plus the offset of the token in that document (its ids followed by
``eos_id``). Resuming re-reads that document and skips that many ids, so the blocks after a resume are exactly the
blocks the uninterrupted epoch would have yielded. Each epoch's last partial block is filled with ``pad_id``. An
empty document (no ids) contributes nothing, not even ``eos_id``, exactly as the converters skip it, so packing on
the fly and packing at conversion time yield the same tokens from the same documents.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from streaming_core import StreamingDataset
from streaming_datasets.base import RecipeDataset
from streaming_datasets.tokenizers import AUTO, TokenSpec

__all__ = ['StreamingPackedTokens', 'PackedTokenStream']


class StreamingPackedTokens(RecipeDataset):
    """Fixed-length token blocks written by ``convert_packed_tokens``: each sample is a 1-D ``int64`` tensor of
    ``block_size`` ids (``transform`` applies to it).

    Args:
        remote, local, split, transform: As for :class:`~streaming_datasets.base.RecipeDataset`.
        **kwargs: Every other :class:`StreamingDataset` argument.
    """

    required_columns = ('tokens',)
    pair = False

    def to_sample(self, raw: Mapping[str, Any]) -> Any:
        """The block as an ``int64`` tensor."""
        block = torch.from_numpy(np.asarray(raw['tokens']).astype(np.int64))
        return self.transform(block) if self.transform is not None else block


class PackedTokenStream(IterableDataset):
    """Pack the documents of a :class:`StreamingDataset` into blocks of ``block_size`` ids while iterating.

    Each document contributes its ids followed by ``eos_id`` (when not None), an empty one nothing; blocks are cut
    from that stream in the dataset's deterministic order; the epoch's last partial block is padded with
    ``pad_id``. Each yielded block is a 1-D ``int64`` tensor.

    Args:
        dataset: The documents (samples with a ``tokens_key`` array, or a ``text_key`` string to tokenize).
        block_size: Ids per block.
        tokenizer: For text documents: a callable ``str -> list[int]``, ``'module:name'``, or None for the built-in
            :class:`~streaming_datasets.tokenizers.ByteTokenizer`.
        eos_id: The separator (``'auto'``: the tokenizer's; None: none).
        pad_id: The padding id (``'auto'``: the tokenizer's pad id, else ``eos_id``).
        vocab_size: Ids must be below it (default: the tokenizer's).
        text_key: The text column.
        tokens_key: The pre-tokenized column, used when a sample has it.
    """

    def __init__(self, dataset: StreamingDataset, *, block_size: int, tokenizer: Any = None,
                 eos_id: int | str | None = AUTO, pad_id: int | str | None = AUTO, vocab_size: int | None = None,
                 text_key: str = 'text', tokens_key: str = 'tokens') -> None:
        if not isinstance(dataset, StreamingDataset):
            raise TypeError(f'PackedTokenStream wraps a StreamingDataset, got {type(dataset).__name__}.')
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f'block_size must be a positive integer, got {block_size!r}.')
        self.dataset = dataset
        self.block_size = block_size
        self.spec = TokenSpec.create(tokenizer, eos_id=eos_id, pad_id=pad_id, vocab_size=vocab_size)
        if self.spec.pad_id is None:
            raise ValueError('PackedTokenStream needs a pad_id (or an eos_id to pad with) for the last block.')
        self.text_key = text_key
        self.tokens_key = tokens_key
        self._resume: dict[str, Any] | None = None
        self._start_offset = 0
        self._docs = array('q')      # per yielded block: documents of this pass before the next block's start
        self._offsets = array('q')   # per yielded block: the next block's first id's offset in its document
        self._iterated = False

    # ------------------------------------------------------------------------------------------------------------
    def _check_world(self) -> None:
        if get_worker_info() is not None:
            raise RuntimeError('PackedTokenStream must be iterated in the process that checkpoints it (its state '
                               'lives there): use DataLoader(num_workers=0), or pack at conversion time with '
                               'convert_packed_tokens and StreamingPackedTokens for exact resumption with workers.')
        ranks = self.dataset.world.num_ranks
        if ranks > 1:
            raise RuntimeError(f'PackedTokenStream resumes exactly only on a single rank, but the world has {ranks} '
                               f'ranks: pack at conversion time with convert_packed_tokens and read the blocks with '
                               f'StreamingPackedTokens, which resumes exactly on any world.')

    def _ids(self, sample: Any, where: str) -> np.ndarray:
        if not isinstance(sample, Mapping):
            raise TypeError(f'{where}: PackedTokenStream needs dict samples with {self.tokens_key!r} or '
                            f'{self.text_key!r}, got {type(sample).__name__}.')
        if self.tokens_key in sample:
            ids = self.spec.check(sample[self.tokens_key], where)
        elif self.text_key in sample:
            ids = self.spec.encode(sample[self.text_key], where)
        else:
            raise KeyError(f'{where}: the sample has neither {self.tokens_key!r} nor {self.text_key!r} (columns: '
                           f'{sorted(sample)}).')
        if self.spec.eos_id is not None and len(ids):  # an empty document gets no separator (as the converters)
            ids = np.append(ids, np.array([self.spec.eos_id], dtype=ids.dtype))
        return ids

    def __iter__(self) -> Iterator[torch.Tensor]:
        """Yield this epoch's blocks (resuming where :meth:`load_state_dict` says, if it was called)."""
        self._check_world()
        skip = 0
        if self._resume is not None:
            self.dataset.load_state_dict(self._resume['dataset'])
            skip = int(self._resume['skip_tokens'])
            self._resume = None
        self._start_offset = skip
        self._docs, self._offsets = array('q'), array('q')
        self._iterated = True
        size, pad = self.block_size, self.spec.pad_id
        pending: list[np.ndarray] = []
        count = 0
        doc = -1
        for doc, sample in enumerate(self.dataset):
            ids = self._ids(sample, f'document {doc} of this pass')
            offset = skip if doc == 0 else 0
            if offset > len(ids):
                raise ValueError(f'The resume state skips {offset} ids of a document of {len(ids)}: it was made with '
                                 f'another tokenizer, eos_id or dataset.')
            while offset < len(ids):
                take = ids[offset:offset + size - count]
                pending.append(take)
                count += len(take)
                offset += len(take)
                if count == size:
                    block = np.concatenate(pending)
                    pending, count = [], 0
                    if offset < len(ids):
                        self._docs.append(doc)
                        self._offsets.append(offset)
                    else:
                        self._docs.append(doc + 1)
                        self._offsets.append(0)
                    yield torch.from_numpy(block.astype(np.int64))
        if count:
            block = np.concatenate([*pending, np.full(size - count, pad, dtype=pending[0].dtype)])
            self._docs.append(doc + 1)
            self._offsets.append(0)
            yield torch.from_numpy(block.astype(np.int64))

    # ------------------------------------------------------------------------------------------------------------
    def state_dict(self, num_blocks: int | None = None) -> dict[str, Any]:
        """The state after ``num_blocks`` blocks of the current pass were consumed (default: every block yielded).

        Returns:
            ``{'dataset': the underlying state at the document holding the next block's first id, 'skip_tokens':
            that id's offset in the document, 'block_size': ...}``.
        """
        if not self._iterated:
            raise RuntimeError('PackedTokenStream.state_dict: nothing was iterated in this process yet.')
        yielded = len(self._docs)
        count = yielded if num_blocks is None else int(num_blocks)
        if not 0 <= count <= yielded:
            raise ValueError(f'num_blocks must be in [0, {yielded}] (the blocks yielded in this pass), got '
                             f'{num_blocks!r}.')
        docs, skip = (0, self._start_offset) if count == 0 else (self._docs[count - 1], self._offsets[count - 1])
        return {'dataset': self.dataset.state_dict(int(docs), False), 'skip_tokens': int(skip),
                'block_size': self.block_size}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict`'s result at the next iteration."""
        if not isinstance(state, Mapping) or not {'dataset', 'skip_tokens', 'block_size'} <= set(state):
            raise ValueError('PackedTokenStream.load_state_dict expects the dict of PackedTokenStream.state_dict '
                             '(keys dataset, skip_tokens, block_size).')
        if int(state['block_size']) != self.block_size:
            raise ValueError(f'The state was saved with block_size {state["block_size"]}, this stream has '
                             f'{self.block_size}.')
        if int(state['skip_tokens']) < 0:
            raise ValueError(f'skip_tokens must be non-negative, got {state["skip_tokens"]}.')
        self._resume = {'dataset': dict(state['dataset']), 'skip_tokens': int(state['skip_tokens'])}

