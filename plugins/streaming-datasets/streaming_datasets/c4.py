"""C4 (Colossal Clean Crawled Corpus): convert its gzip JSON-lines files to MDS.

Source layout (``allenai/c4``, e.g. the ``en`` variant)::

    c4/en/
        c4-train.00000-of-01024.json.gz ... c4-train.01023-of-01024.json.gz
        c4-validation.00000-of-00008.json.gz ... c4-validation.00007-of-00008.json.gz

One record per line: ``{"text": ..., "timestamp": "2019-04-25T12:57:54Z", "url": ...}``. Splits come from the
file names (``train -> train``, ``validation -> val``; ``splits`` names the output splits); files are read in
shard order, lines in order. Stored columns (as mosaicml-streaming's C4): ``text``, ``timestamp``, ``url`` (str).
Converting a subset of the shards is allowed and logged.
"""

from __future__ import annotations

import argparse
import logging
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

__all__ = ['convert_c4', 'find_c4_files', 'register', 'COLUMNS', 'SPLIT_NAMES']

logger = logging.getLogger('streaming_datasets')

COLUMNS = {'text': 'str', 'timestamp': 'str', 'url': 'str'}
#: Source split (in the file names) -> output split.
SPLIT_NAMES = {'train': 'train', 'validation': 'val'}
_NAME = re.compile(r'^c4-(?P<split>[a-z]+)\.(?P<index>\d+)-of-(?P<count>\d+)\.json(\.gz)?$')


def find_c4_files(source: str) -> dict[str, list[str]]:
    """Source split -> its files, in shard order (warns when shards are missing)."""
    if not os.path.isdir(source):
        raise SourceLayoutError(f'C4 source {source} is not a directory.')
    found: dict[str, list[tuple[int, int, str]]] = {}
    for name in os.listdir(source):
        match = _NAME.match(name)
        if match:
            found.setdefault(match['split'], []).append((int(match['index']), int(match['count']),
                                                         os.path.join(source, name)))
    if not found:
        raise SourceLayoutError(f'{source} holds no C4 files named like c4-train.00000-of-01024.json.gz.')
    result = {}
    for split, files in found.items():
        files.sort()
        expected = files[0][1]
        if len(files) != expected:
            logger.warning('C4 %s: converting %d of its %d files.', split, len(files), expected)
        result[split] = [path for _, _, path in files]
    return result


def produce_c4(items: Sequence[str]) -> Iterator[dict[str, Any]]:
    """Samples for the lines of the given files."""
    for path in items:
        for line, record in iter_json_lines(path):
            yield {'text': text_field(record, 'text', path, line),
                   'timestamp': text_field(record, 'timestamp', path, line, cast=str),
                   'url': text_field(record, 'url', path, line)}


def convert_c4(source: str, out: str, *, splits: Sequence[str] | None = None,
               options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert C4 into ``out/train`` and ``out/val`` (MDS).

    Args:
        source: The folder of ``c4-<split>.NNNNN-of-NNNNN.json.gz`` files (e.g. ``c4/en``).
        out: The output root (a directory or a remote URL).
        splits: Output splits to convert (``train``, ``val``; default: all found). The file names' spelling
            ``validation`` is still accepted, with a deprecation warning.
        options: Writer and parallelism options (workers split the file list).

    Returns:
        Output split name -> what was written.
    """
    files = {SPLIT_NAMES.get(split, split): paths for split, paths in sorted(find_c4_files(source).items())}
    chosen = select_splits(splits, list(files), dataset='C4', aliases={'validation': 'val'},
                           unknown='C4 split {name!r} has no files in ' + source + ' (found: {found}).')
    plans = [SplitPlan(name, files[name], produce_c4, COLUMNS, desc=f'C4 {name}', item_unit='files')
             for name in chosen]
    return convert_splits(plans, out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('c4', convert_c4(args.source, args.out, splits=args.splits, options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert c4``."""
    parser = add_converter_parser(
        subparsers, 'c4', run=_run, help='convert C4 (c4-<split>.*.json.gz) to MDS',
        description='Convert C4 JSON-lines files (SOURCE/c4-train.00000-of-01024.json.gz, c4-validation...) to MDS '
                    'in OUT/train and OUT/val. Columns: text, timestamp, url (str).')
    parser.add_argument('source', help='the folder of c4-*.json.gz files, e.g. c4/en')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    add_splits_argument(parser, 'train,val', old='validation')
