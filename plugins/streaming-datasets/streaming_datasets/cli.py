"""Shared pieces of the ``streaming convert <name>`` subcommands.

Each recipe module exposes ``register(subparsers)``, found by the core CLI through the entry-point group
``streaming_core.converters``. It adds one subparser with :func:`add_converter_parser`, which also adds the options
every converter shares (``--workers``, ``--compression``, ``--hashes``, ``--size-limit``, ``--exist-ok``,
``--no-progress``/``--quiet``, ``--storage-option``), and sets ``run`` to a callable taking the parsed arguments
and returning an exit code.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from streaming_core.plugin_api import storage_options
from streaming_datasets.conversion import DEFAULT_SIZE_LIMIT, ConversionResult, WriterOptions

__all__ = ['add_converter_parser', 'add_splits_argument', 'writer_options', 'print_results', 'split_list',
           'SPLITS_HELP']

#: The one meaning of ``--splits``, the same for every converter.
SPLITS_HELP = ('comma-separated OUTPUT split names, as written under OUT/ and passed as split= to the streaming '
               'class')


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {text!r}') from None
    if value < 1:
        raise argparse.ArgumentTypeError(f'expected a positive integer, got {value}')
    return value


def split_list(text: str) -> list[str]:
    """Parse a comma-separated list (``'train,val'``)."""
    return [part.strip() for part in text.split(',') if part.strip()]


def add_converter_parser(subparsers: Any, name: str, *, help: str, description: str,
                         run: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` with the shared converter options; the caller adds its own arguments."""
    parser = subparsers.add_parser(name, help=help, description=description,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_argument_group('writing')
    group.add_argument('--workers', type=_positive_int, default=1, metavar='N',
                       help='convert in N parallel processes (contiguous partitions, merged in order; default 1)')
    group.add_argument('--compression', default=None, metavar='ALGO[:LEVEL]',
                       help='shard compression, e.g. zstd or zstd:7 (default: none)')
    group.add_argument('--hashes', type=split_list, default=None, metavar='NAMES',
                       help='comma-separated hash names recorded per shard file, e.g. sha1,xxh64')
    group.add_argument('--size-limit', default=str(DEFAULT_SIZE_LIMIT), metavar='BYTES',
                       help='shard size limit, e.g. 67108864 or 64mb (default 64 MiB)')
    group.add_argument('--exist-ok', action='store_true', help='replace a non-empty output directory')
    group.add_argument('--no-progress', '--quiet', dest='no_progress', action='store_true',
                       help='hide the progress bars')
    group.add_argument('--storage-option', metavar='KEY=VALUE', action='append', default=[],
                       help='an option for a remote OUT\'s storage backend (endpoint_url, profile, ...); repeat for '
                            'several; values are read as JSON when they parse, else as text')
    parser.set_defaults(run=run)
    return parser


def add_splits_argument(parser: argparse.ArgumentParser, names: str, *, old: str | None = None) -> None:
    """Add ``--splits`` with its one meaning: output split names (``names`` lists them, e.g. ``'train,val'``).

    Args:
        parser: The converter's parser.
        names: The output splits of a full conversion, for the help text.
        old: The source spellings still accepted with a deprecation message (for the help text).
    """
    extra = f'; the source spellings {old} still work but are deprecated' if old else ''
    parser.add_argument('--splits', type=split_list, default=None, metavar='SPLIT,...',
                        help=f'{SPLITS_HELP} (default: all that the source has: {names}){extra}')


def writer_options(args: argparse.Namespace) -> WriterOptions:
    """The :class:`WriterOptions` from the shared options."""
    size_limit: int | str | None = args.size_limit
    if isinstance(size_limit, str) and size_limit.isdigit():
        size_limit = int(size_limit)
    return WriterOptions(workers=args.workers, compression=args.compression, hashes=args.hashes,
                         size_limit=size_limit, exist_ok=args.exist_ok, progress=not args.no_progress,
                         storage_options=storage_options(args))


def print_results(name: str, results: Mapping[str, ConversionResult]) -> int:
    """Print the one result line of each split written (the only place it is printed); returns 0 (the exit code)."""
    for split, result in results.items():
        line = f'{name} {split}: {result.samples} samples -> {result.out}'
        if result.partitions > 1:
            line += f' ({result.partitions} partitions merged)'
        if result.skipped:
            line += f'; skipped {result.skipped} (first: {result.skip_reasons[0]})'
        print(line, flush=True)
    return 0
