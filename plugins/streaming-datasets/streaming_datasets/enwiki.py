"""English Wikipedia: convert article JSON lines (WikiExtractor ``--json`` output and the like) to MDS.

Source layout (``WikiExtractor --json enwiki-YYYYMMDD-pages-articles.xml.bz2 -o text``)::

    text/AA/wiki_00  text/AA/wiki_01 ... text/AB/wiki_00 ...

or any folder of ``*.jsonl`` / ``*.json`` files (optionally ``.gz``, ``.bz2``, ``.xz``, ``.zst``). One article per
line: ``{"id": "12", "url": "https://en.wikipedia.org/wiki?curid=12", "title": "Anarchism", "text": ...}``
(other fields such as ``revid`` are ignored). Files are read in path order, lines in order. Stored columns:
``id``, ``url``, ``title``, ``text`` (str; a numeric id is stored as its decimal string). Wikipedia has no splits:
everything goes to ``out/<split>`` (default ``train``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import Any

from streaming_datasets.cli import add_converter_parser, print_results, writer_options
from streaming_datasets.conversion import ConversionResult, SourceLayoutError, SplitPlan, WriterOptions, convert_splits
from streaming_datasets.textfiles import find_files, iter_json_lines, text_field

__all__ = ['convert_enwiki', 'register', 'COLUMNS']

COLUMNS = {'id': 'str', 'url': 'str', 'title': 'str', 'text': 'str'}


def produce_enwiki(items: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Samples for the articles of the given files."""
    for path in items:
        for line, record in iter_json_lines(path):
            yield {'id': text_field(record, 'id', path, line, cast=str), 'url': text_field(record, 'url', path, line),
                   'title': text_field(record, 'title', path, line), 'text': text_field(record, 'text', path, line)}


def convert_enwiki(source: str, out: str, *, split: str = 'train',
                   options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert Wikipedia article JSON lines into ``out/<split>`` (MDS).

    Args:
        source: A folder searched recursively for ``wiki_NN`` and ``*.jsonl``/``*.json`` files, or one file.
        out: The output root (a directory or a remote URL).
        split: The output split name.
        options: Writer and parallelism options (workers split the file list).

    Returns:
        ``{split: what was written}``.
    """
    files = find_files(source)
    if not files:
        raise SourceLayoutError(f'{source} holds no article files (wiki_NN, *.jsonl, *.json, optionally '
                                f'compressed).')
    return convert_splits([SplitPlan(split, files, produce_enwiki, COLUMNS, desc=f'Wikipedia {split}',
                                     item_unit='files')], out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('enwiki', convert_enwiki(args.source, args.out, split=args.split,
                                                  options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert enwiki``."""
    parser = add_converter_parser(
        subparsers, 'enwiki', run=_run, help='convert English Wikipedia article JSON lines to MDS',
        description='Convert Wikipedia articles as JSON lines (WikiExtractor --json output: SOURCE/AA/wiki_00..., '
                    'or *.jsonl files) to MDS in OUT/<split>. Columns: id, url, title, text (str).')
    parser.add_argument('source', help='a folder of article files (searched recursively) or one file')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--split', default='train', help='the output split name (default train)')
