"""The Pile: convert its zstd JSON-lines files to MDS.

Source layout (the original release)::

    pile/
        train/00.jsonl.zst ... train/29.jsonl.zst
        val.jsonl.zst
        test.jsonl.zst

One record per line: ``{"text": ..., "meta": {"pile_set_name": "Pile-CC"}}``. Files are read in name order,
lines in order. Stored columns (as mosaicml-streaming's Pile): ``text``, ``pile_set_name`` (str). Uncompressed or
gzip files (``00.jsonl``, ``val.jsonl.gz``) are read too.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from streaming_datasets.cli import add_converter_parser, add_splits_argument, print_results, writer_options
from streaming_datasets.conversion import (
    ConversionResult,
    SourceLayoutError,
    SplitPlan,
    WriterOptions,
    convert_splits,
    select_splits,
)
from streaming_datasets.textfiles import iter_json_lines, text_field

__all__ = ['convert_pile', 'find_pile_files', 'register', 'COLUMNS']

COLUMNS = {'text': 'str', 'pile_set_name': 'str'}
_SUFFIX = r'\.jsonl(\.(zst|gz))?$'
_TRAIN = re.compile(r'^\d+' + _SUFFIX)


def find_pile_files(source: str) -> dict[str, list[str]]:
    """Split -> its files: ``train/NN.jsonl.zst`` in order, ``val.jsonl.zst``, ``test.jsonl.zst``."""
    if not os.path.isdir(source):
        raise SourceLayoutError(f'Pile source {source} is not a directory.')
    files: dict[str, list[str]] = {}
    train = os.path.join(source, 'train')
    if os.path.isdir(train):
        names = sorted((name for name in os.listdir(train) if _TRAIN.match(name)), key=lambda n: int(n.split('.')[0]))
        if names:
            files['train'] = [os.path.join(train, name) for name in names]
    for split in ('val', 'test'):
        for name in sorted(os.listdir(source)):
            if re.match(re.escape(split) + _SUFFIX, name):
                files[split] = [os.path.join(source, name)]
                break
    if not files:
        raise SourceLayoutError(f'{source} holds no Pile files: expected train/00.jsonl.zst..., val.jsonl.zst, '
                                f'test.jsonl.zst.')
    return files


def produce_pile(items: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Samples for the lines of the given files."""
    for path in items:
        for line, record in iter_json_lines(path):
            yield {'text': text_field(record, 'text', path, line),
                   'pile_set_name': text_field(record, 'pile_set_name', path, line, nested=('meta',))}


def convert_pile(source: str, out: str, *, splits: Sequence[str] | None = None,
                 options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert The Pile into ``out/<split>`` (MDS).

    Args:
        source: The folder holding ``train/``, ``val.jsonl.zst`` and ``test.jsonl.zst``.
        out: The output root (a directory or a remote URL).
        splits: The output splits (``train``, ``val``, ``test``; default: all found).
        options: Writer and parallelism options (workers split the file list).

    Returns:
        Split name -> what was written.
    """
    files = find_pile_files(source)
    chosen = select_splits(splits, [s for s in ('train', 'val', 'test') if s in files], dataset='Pile',
                           unknown='Pile split {name!r} has no files in ' + source + ' (found: {found}).')
    plans = [SplitPlan(split, files[split], produce_pile, COLUMNS, desc=f'Pile {split}', item_unit='files')
             for split in chosen]
    return convert_splits(plans, out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('pile', convert_pile(args.source, args.out, splits=args.splits,
                                              options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert pile``."""
    parser = add_converter_parser(
        subparsers, 'pile', run=_run, help='convert The Pile (train/NN.jsonl.zst, val, test) to MDS',
        description='Convert The Pile (SOURCE/train/00.jsonl.zst..., SOURCE/val.jsonl.zst, SOURCE/test.jsonl.zst) '
                    'to MDS in OUT/<split>. Columns: text, pile_set_name (str).')
    parser.add_argument('source', help='the Pile folder')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    add_splits_argument(parser, 'train,val,test')
