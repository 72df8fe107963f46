"""``streaming merge-index OUT [INDEX ...]``: merge the indexes of datasets written in parallel into one."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from streaming_core.tools.commands._common import add_storage_option, storage_options

__all__ = ['add_parser', 'run']

_EPILOG = textwrap.dedent('''\
    Forms:
      streaming merge-index OUT                  every OUT/<partition>/index.json, in lexicographic order
      streaming merge-index OUT A/index.json B/index.json ...   the listed partition indexes, in the given order
    OUT may be a directory, a remote URL, or a directory with --remote URL (written locally and uploaded).
    Each shard file name is prefixed with its partition's directory name, so partitions must be direct
    subdirectories of OUT. Running it again overwrites the merged index.''')


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'merge-index', help='merge the index.json files of partitions written in parallel',
        description='Merge the indexes of partitions (datasets written in parallel into subdirectories of OUT) '
                    'into OUT/index.json, so OUT reads as one dataset.',
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('out', metavar='OUT', help='the dataset root: a directory or a remote URL')
    parser.add_argument('indexes', metavar='INDEX', nargs='*',
                        help='partition index.json paths or URLs, in order (default: discover them under OUT)')
    parser.add_argument('--remote', default=None, metavar='URL',
                        help='also upload the merged index here (OUT is then the local directory)')
    parser.add_argument('--no-keep-local', dest='keep_local', action='store_false',
                        help='with --remote: delete local files that the remote holds (never one without a copy)')
    parser.add_argument('--download-timeout', type=float, default=60.0, metavar='SECONDS',
                        help='per-request timeout for remote indexes (default 60)')
    add_storage_option(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Merge and print where the index was written, with its shard and sample counts."""
    import json
    import os
    import tempfile

    from streaming_core.storage.facade import download_file, is_remote, local_path
    from streaming_core.storage.redact import redact_url
    from streaming_core.writing.merge import merge_index_from_list, merge_index_from_root
    out: str | tuple[str, str] = (args.out, args.remote) if args.remote else args.out
    options = storage_options(args)
    common = {'storage_options': options}
    if args.indexes:
        where = merge_index_from_list(list(args.indexes), out, args.keep_local, args.download_timeout, **common)
    else:
        where = merge_index_from_root(out, args.keep_local, args.download_timeout, **common)
    if is_remote(where):
        with tempfile.TemporaryDirectory(prefix='streaming-merge-cli-') as scratch:
            path = os.path.join(scratch, 'index.json')
            download_file(where, path, timeout=args.download_timeout, options=options)
            with open(path, 'rb') as handle:
                index = json.loads(handle.read())
    else:
        with open(local_path(where), 'rb') as handle:
            index = json.loads(handle.read())
    shards = index.get('shards', [])
    samples = sum(int(entry.get('samples') or 0) for entry in shards)
    print(f'Merged {len(shards)} shards ({samples} samples) into {redact_url(where)}')
    return 0
