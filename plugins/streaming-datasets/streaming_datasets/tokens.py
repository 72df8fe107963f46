"""LLM pretraining converters: tokenize documents and store the token ids, packed or one document per sample.

``convert_packed_tokens`` concatenates every document's ids followed by the separator ``eos_id`` and cuts the
stream into blocks of exactly ``block_size`` ids, stored as one ``ndarray:<dtype>:<block_size>`` column
``tokens`` (``uint16`` when the vocabulary fits, else ``uint32``). The last, partial block is filled with
``pad_id`` (or dropped with ``drop_last``). Each stored sample is one block, so shuffling, sharding over ranks and
mid-epoch resumption are the core's, exact to the block. With ``workers=N`` each of the ``N`` contiguous
partitions of the documents is packed on its own, so each partition's last block is padded: an epoch holds every
token of the corpus exactly once, one ``eos_id`` per non-empty document and fewer than ``N * block_size`` pad ids.

``convert_tokens`` stores one sample per non-empty document: ``tokens`` as ``ndarray:<dtype>`` (no separator
added). :class:`~streaming_datasets.packing.PackedTokenStream` packs such a dataset (or a text dataset) on the fly.

Empty documents (no ids) are the same on every route: skipped and counted by both converters, skipped by
``PackedTokenStream``, never given an ``eos_id``; so both routes yield the same tokens from the same documents.

Documents come from JSON-lines files (any compression :mod:`streaming_datasets.textfiles` reads; a folder is
searched for them) or from a local streaming dataset split directory (one with ``index.json``, e.g. written by the
C4, Pile or Wikipedia converters), read in order; ``text_key`` names the text field. A dataset root (a folder of
split directories) is refused with the split directories to give instead.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming_datasets.cli import add_converter_parser, print_results, writer_options
from streaming_datasets.conversion import (
    ConversionResult,
    Skip,
    SourceLayoutError,
    SplitPlan,
    WriterOptions,
    convert_splits,
)
from streaming_datasets.textfiles import find_files, iter_json_lines, text_field
from streaming_datasets.tokenizers import AUTO, TokenSpec

__all__ = ['convert_packed_tokens', 'convert_tokens', 'document_items', 'iter_documents', 'PackConfig',
           'register_tokens', 'register_pack_tokens']

_DATASET_CHUNK = 1000  # documents per work item when reading a streaming dataset


@dataclass(frozen=True)
class PackConfig:
    """What a token producer needs besides its items (sent to each partition process with the items)."""

    spec: TokenSpec
    text_key: str
    block_size: int = 0
    drop_last: bool = False


def document_items(inputs: Sequence[str] | str) -> list[tuple[str, str, int, int]]:
    """Work items over the documents of ``inputs``: ``('jsonl', path, 0, 0)`` per file, or ``('dataset', dir,
    start, stop)`` per chunk of a local streaming dataset."""
    items: list[tuple[str, str, int, int]] = []
    for source in [inputs] if isinstance(inputs, str) else inputs:
        if os.path.isfile(os.path.join(source, 'index.json')):
            from streaming_core import LocalDataset
            count = len(LocalDataset(source))
            items.extend(('dataset', source, start, min(start + _DATASET_CHUNK, count))
                         for start in range(0, count, _DATASET_CHUNK))
            continue
        _refuse_dataset_root(source)
        files = find_files(source)
        if not files:
            raise SourceLayoutError(f'{source} is neither a streaming dataset (no index.json) nor a JSON-lines file '
                                    f'or folder of them. For a converted dataset, give its split directory (for '
                                    f'example /data/c4/train).')
        items.extend(('jsonl', path, 0, 0) for path in files)
    if not items:
        raise SourceLayoutError(f'No documents found in {inputs}.')
    return items


def _refuse_dataset_root(source: str) -> None:
    """A folder holding streaming datasets (``index.json`` below it) is a dataset root, not documents: name its
    split directories instead of reading ``index.json`` as JSON lines."""
    if not os.path.isdir(source):
        return
    splits = []
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith('.'))
        if 'index.json' in filenames:
            splits.append(os.path.relpath(dirpath, source))
            dirnames[:] = []  # a dataset's partition folders are part of it
    if splits:
        example = os.path.join(source, splits[0])
        raise SourceLayoutError(f'{source} is not a split of a streaming dataset but holds {len(splits)} of them '
                                f'({", ".join(splits[:5])}{", ..." if len(splits) > 5 else ""}): give the split '
                                f'directory, the one holding index.json (for example {example}).')


_datasets: dict[str, Any] = {}


def iter_documents(items: Iterable[tuple[str, str, int, int]], text_key: str) -> Iterator[tuple[str, str]]:
    """``(text, where)`` for every document of the items, in order."""
    for kind, source, start, stop in items:
        if kind == 'jsonl':
            for line, record in iter_json_lines(source):
                yield text_field(record, text_key, source, line), f'{source}:{line}'
            continue
        if source not in _datasets:
            from streaming_core import LocalDataset
            _datasets[source] = LocalDataset(source)
        dataset = _datasets[source]
        for index in range(start, stop):
            sample = dataset[index]
            if text_key not in sample:
                raise SourceLayoutError(f'{source} sample {index} has no column {text_key!r} (columns: '
                                        f'{sorted(sample)}); pass text_key.')
            yield sample[text_key], f'{source} sample {index}'


def _config(items: Sequence[tuple[PackConfig, tuple[str, str, int, int]]]) -> PackConfig:
    return items[0][0]


def produce_packed(items: Sequence[tuple[PackConfig, tuple[str, str, int, int]]]) -> Iterator[dict[str, Any] | Skip]:
    """Pack the documents of ``items`` into blocks (one partition: its last block padded).

    Each document contributes its ids followed by ``eos_id``; an empty document (no ids) contributes nothing and is
    skipped and counted, as :func:`produce_tokens` and :class:`~streaming_datasets.packing.PackedTokenStream` do.
    """
    config = _config(items)
    spec, size = config.spec, config.block_size
    pending: list[np.ndarray] = []
    count = 0
    eos = None if spec.eos_id is None else np.array([spec.eos_id], dtype=spec.dtype)
    for text, where in iter_documents((item for _, item in items), config.text_key):
        ids = spec.encode(text, where)
        if not len(ids):
            yield Skip(f'{where}: empty document')
            continue
        pending.append(ids)
        count += len(ids)
        if eos is not None:
            pending.append(eos)
            count += 1
        if count >= size:
            stream = np.concatenate(pending)
            full = len(stream) // size * size
            for start in range(0, full, size):
                yield {'tokens': stream[start:start + size]}
            pending, count = [stream[full:]], len(stream) - full
    if count and not config.drop_last:
        if spec.pad_id is None:
            raise ValueError(f'The last block holds {count} of {size} tokens and there is no pad_id: give pad_id, '
                             f'or drop_last=True to leave the tail out.')
        tail = np.concatenate(pending)
        yield {'tokens': np.concatenate([tail, np.full(size - count, spec.pad_id, dtype=spec.dtype)])}


def produce_tokens(items: Sequence[tuple[PackConfig, tuple[str, str, int, int]]]) -> Iterator[dict[str, Any] | Skip]:
    """One sample per document: its ids (empty documents are skipped and counted)."""
    config = _config(items)
    for text, where in iter_documents((item for _, item in items), config.text_key):
        ids = config.spec.encode(text, where)
        yield {'tokens': ids} if len(ids) else Skip(f'{where}: empty document')


def _plan(split: str, items: list[tuple[PackConfig, tuple[str, str, int, int]]], produce: Any,
          columns: dict[str, str], desc: str) -> SplitPlan:
    unit = 'files' if all(item[0] == 'jsonl' for _, item in items) else 'parts'
    return SplitPlan(split, items, produce, columns, desc=desc, item_unit=unit)


def _check_picklable(spec: TokenSpec, options: WriterOptions | None) -> None:
    if options is not None and options.workers > 1:
        import pickle
        try:
            pickle.dumps(spec.tokenizer)
        except Exception as err:
            raise ValueError(f'The tokenizer {spec.tokenizer!r} cannot be sent to worker processes ({err}): define it '
                             f'at module level (or as a class), or use workers=1.') from err


def convert_packed_tokens(inputs: Sequence[str] | str, out: str, *, block_size: int,
                          tokenizer: Any = None, eos_id: int | str | None = AUTO, pad_id: int | str | None = AUTO,
                          vocab_size: int | None = None, text_key: str = 'text', drop_last: bool = False,
                          split: str = 'train', options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Tokenize documents and store fixed-length blocks of ids in ``out/<split>`` (one block per sample).

    Args:
        inputs: JSON-lines files or folders, or local streaming dataset directories.
        out: The output root (a directory or a remote URL).
        block_size: Ids per block.
        tokenizer: A callable ``str -> list[int]``, an import path ``'module:name'``, or None/``'bytes'`` for
            :class:`~streaming_datasets.tokenizers.ByteTokenizer`.
        eos_id: The separator after each document (``'auto'``: the tokenizer's; None: no separator).
        pad_id: The id filling the last block (``'auto'``: the tokenizer's pad id, else ``eos_id``).
        vocab_size: The vocabulary size (default: the tokenizer's); chooses ``uint16`` or ``uint32``.
        text_key: The text field of the documents.
        drop_last: Drop the last partial block instead of padding it.
        split: The output split name.
        options: Writer and parallelism options.

    Returns:
        ``{split: what was written}`` (``samples`` counts blocks).
    """
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f'block_size must be a positive integer, got {block_size!r}.')
    spec = TokenSpec.create(tokenizer, eos_id=eos_id, pad_id=pad_id, vocab_size=vocab_size)
    _check_picklable(spec, options)
    config = PackConfig(spec, text_key, block_size, drop_last)
    items = [(config, item) for item in document_items(inputs)]
    columns = {'tokens': f'ndarray:{spec.dtype}:{block_size}'}
    desc = f'Packing {split} ({block_size} tokens/block)'
    return convert_splits([_plan(split, items, produce_packed, columns, desc)], out, options)


def convert_tokens(inputs: Sequence[str] | str, out: str, *, tokenizer: Any = None, vocab_size: int | None = None,
                   text_key: str = 'text', split: str = 'train',
                   options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Tokenize documents and store one sample per document (``tokens``: ``ndarray:uint16`` or ``uint32``).

    Args:
        inputs: JSON-lines files or folders, or local streaming dataset directories.
        out: The output root (a directory or a remote URL).
        tokenizer: As for :func:`convert_packed_tokens`.
        vocab_size: The vocabulary size (default: the tokenizer's); chooses ``uint16`` or ``uint32``.
        text_key: The text field of the documents.
        split: The output split name.
        options: Writer and parallelism options.

    Returns:
        ``{split: what was written}``.
    """
    spec = TokenSpec.create(tokenizer, eos_id=None, pad_id=None, vocab_size=vocab_size)
    _check_picklable(spec, options)
    config = PackConfig(spec, text_key)
    items = [(config, item) for item in document_items(inputs)]
    return convert_splits([_plan(split, items, produce_tokens, {'tokens': f'ndarray:{spec.dtype}'},
                                 f'Tokenizing {split}')], out, options)


# ----------------------------------------------------------------------------------------------------------------
def _special(text: str) -> int | str | None:
    if text == AUTO:
        return AUTO
    if text.lower() == 'none':
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected an integer id, "auto" or "none", got {text!r}') from None


def _add_token_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('inputs', nargs='+', help='JSON-lines files/folders or local streaming dataset directories')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--tokenizer', default='bytes',
                        help='"bytes" (built-in byte-level) or an import path package.module:name (default bytes)')
    parser.add_argument('--vocab-size', type=int, default=None, help="vocabulary size (default: the tokenizer's)")
    parser.add_argument('--text-key', default='text', help='the text field (default text)')
    parser.add_argument('--split', default='train', help='the output split name (default train)')


def _run_pack(args: argparse.Namespace) -> int:
    return print_results('pack-tokens', convert_packed_tokens(
        args.inputs, args.out, block_size=args.block_size, tokenizer=args.tokenizer, eos_id=args.eos_id,
        pad_id=args.pad_id, vocab_size=args.vocab_size, text_key=args.text_key, drop_last=args.drop_last,
        split=args.split, options=writer_options(args)))


def _run_tokens(args: argparse.Namespace) -> int:
    return print_results('tokens', convert_tokens(
        args.inputs, args.out, tokenizer=args.tokenizer, vocab_size=args.vocab_size, text_key=args.text_key,
        split=args.split, options=writer_options(args)))


def register_pack_tokens(subparsers: Any) -> None:
    """Add ``streaming convert pack-tokens``."""
    parser = add_converter_parser(
        subparsers, 'pack-tokens', run=_run_pack, help='tokenize text and store fixed-length token blocks (MDS)',
        description='Tokenize documents (JSON lines or a streaming dataset with a text column), append EOS after each, '
                    'and store blocks of exactly --block-size ids in OUT/<split> as ndarray:uint16/uint32 (one block '
                    'per sample; the last block padded with PAD).')
    _add_token_args(parser)
    parser.add_argument('--block-size', type=int, required=True, help='ids per block, e.g. 2048')
    parser.add_argument('--eos-id', type=_special, default=AUTO, help='separator id, "auto" or "none" (default auto)')
    parser.add_argument('--pad-id', type=_special, default=AUTO, help='padding id, "auto" or "none" (default auto)')
    parser.add_argument('--drop-last', action='store_true', help='drop the last partial block instead of padding it')


def register_tokens(subparsers: Any) -> None:
    """Add ``streaming convert tokens``."""
    parser = add_converter_parser(
        subparsers, 'tokens', run=_run_tokens, help='tokenize text and store one token array per document (MDS)',
        description='Tokenize documents (JSON lines or a streaming dataset with a text column) and store each as one '
                    'sample with a tokens column (ndarray:uint16 or uint32) in OUT/<split>.')
    _add_token_args(parser)
