"""``streaming convert <kind> SRC OUT``: JSON lines, CSV, Parquet and image folders into a dataset, plus the
converters third-party distributions register (entry point group ``streaming_core.converters``)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from streaming_core.tools.commands._common import add_storage_option, comma_list, storage_options

__all__ = ['add_parser', 'run', 'add_writer_options', 'writer_options', 'BUILTIN']

#: Built-in converter subcommands: name -> (function in streaming_core.tools.convert, help, source description).
BUILTIN = {
    'jsonl': ('convert_jsonl', 'JSON lines (one object per line) to a dataset',
              'a .jsonl/.json/.ndjson file (optionally .gz/.bz2/.xz/.zst), a directory of them, or a glob'),
    'csv': ('convert_csv', 'CSV/TSV with a header line to a dataset',
            'a .csv/.tsv file (optionally compressed), a directory of them, or a glob'),
    'parquet': ('convert_parquet', 'Parquet files to a dataset (encodings from the Arrow types)',
                'a .parquet file, a directory of them (searched recursively), or a glob'),
    'imagefolder': ('convert_imagefolder', 'an image tree SRC/<class>/<image> to image, label, label_name, path',
                    'the root directory; each subdirectory is a class'),
}

_EPILOG = textwrap.dedent('''\
    Inferred encodings: JSON ints -> int, numbers -> float64, strings -> str, anything else -> json; CSV columns
    that are all integers -> int, all numbers -> float64, else str; Parquet follows the Arrow types.
    --columns picks and types the columns: "id:int,text:str,emb:ndarray:float32" (a name alone keeps its inferred
    encoding). --workers N writes N partitions in parallel into OUT/<i>/ and merges their indexes in order, so the
    dataset keeps the source order.''')


def add_writer_options(parser: argparse.ArgumentParser, *, columns: bool = True, workers: bool = True,
                       keep_local: bool = True) -> None:
    """The options every converter shares: output format, compression, hashes, size, ``--exist-ok``, ``--quiet``,
    ``--storage-option``; and, unless switched off for a converter that does not take them, ``--columns``,
    ``--workers`` and ``--keep-local``."""
    group = parser.add_argument_group('output')
    group.add_argument('--format', default='mds', metavar='NAME',
                       help='shard format: mds (default), json, csv, tsv, or any installed format plugin')
    if columns:
        group.add_argument('--columns', action='append', metavar='NAME[:ENC],...',
                           help='the columns to write, with optional encodings (default: all, inferred)')
    group.add_argument('--compression', default=None, metavar='ALGO[:LEVEL]',
                       help='compress shards: zstd, zstd:7, gz, bz2, br, lz4, snappy (default: none)')
    group.add_argument('--hashes', default=None, metavar='NAME,...',
                       help='hashes recorded per file in the index, e.g. sha1,xxh3_64 (default: none)')
    group.add_argument('--size-limit', default='64mb', metavar='BYTES',
                       help='start a new shard past this size, e.g. 64mb (default), 1gb, 0 for no limit')
    if workers:
        group.add_argument('--workers', type=int, default=1, metavar='N',
                           help='write N partitions in parallel processes, then merge them in order (default 1)')
    group.add_argument('--exist-ok', action='store_true',
                       help='replace a non-empty OUT instead of refusing')
    if keep_local:
        group.add_argument('--keep-local', action='store_true',
                           help='with a remote OUT given as LOCAL::REMOTE, keep the local files after upload')
    group.add_argument('--quiet', action='store_true', help='no progress bar and no summary')
    add_storage_option(group)  # type: ignore[arg-type]


def parse_out(text: str) -> str | tuple[str, str]:
    """``OUT`` or ``LOCAL::REMOTE`` (a local directory that is also uploaded)."""
    if '::' in text and '[' not in text:  # an IPv6 host such as http://[::1]/ is not a pair
        local, _, remote = text.partition('::')
        if not local or not remote:
            raise ValueError(f'Invalid OUT {text!r}: use DIR, URL, or LOCAL::REMOTE.')
        return local, remote
    return text


def writer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :func:`streaming_core.tools.convert.convert_source` from the shared options."""
    from streaming_core.tools.convert import parse_columns
    size = args.size_limit
    return {'columns': parse_columns(args.columns), 'format': args.format, 'compression': args.compression,
            'hashes': comma_list(args.hashes) or None, 'size_limit': None if str(size).strip() in ('0', '') else size,
            'workers': args.workers, 'exist_ok': args.exist_ok, 'keep_local': args.keep_local,
            'progress': not args.quiet, 'storage_options': storage_options(args)}


def add_parser(subparsers: Any) -> None:
    """Register ``streaming convert`` with the built-in and discovered converters."""
    parser = subparsers.add_parser(
        'convert', help='convert JSON lines, CSV, Parquet, image folders (and plugin formats) to a dataset',
        description='Convert source data into a streaming dataset (MDS unless --format says otherwise). Run '
                    '"streaming convert <kind> --help" for the options of one converter.',
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = parser.add_subparsers(dest='converter', metavar='<kind>', required=True)
    for name, (_, help_text, src_text) in BUILTIN.items():
        sub = kinds.add_parser(name, help=help_text, description=f'Convert {help_text.replace(" to a dataset", "")} '
                               f'into a streaming dataset.', epilog=_EPILOG,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument('src', metavar='SRC', help=src_text)
        sub.add_argument('out', metavar='OUT', help='a local directory, a remote URL, or LOCAL::REMOTE')
        if name == 'csv':
            sub.add_argument('--delimiter', default=None, help='field separator (default "," or a tab for .tsv)')
        add_writer_options(sub)
        sub.set_defaults(run=run)
    from streaming_core.tools.convert.discovery import register_converters
    register_converters(kinds, set(BUILTIN))


def run(args: argparse.Namespace) -> int:
    """Run a built-in converter and print a summary."""
    import streaming_core.tools.convert as convert
    from streaming_core.storage.redact import redact_url
    function = getattr(convert, BUILTIN[args.converter][0])
    options = writer_options(args)
    if args.converter == 'csv':
        options['delimiter'] = args.delimiter.encode().decode('unicode_escape') if args.delimiter else None
    result = function(args.src, parse_out(args.out), **options)
    if not args.quiet:
        columns = ', '.join(f'{name}:{encoding}' for name, encoding in result.columns.items())
        parts = f' from {result.partitions} partitions' if result.partitions > 1 else ''
        print(f'Wrote {result.samples} samples in {result.shards} {result.format} shards{parts} in '
              f'{result.seconds:.1f} s: {redact_url(result.out)}')
        print(f'Columns: {columns}')
    return 0
