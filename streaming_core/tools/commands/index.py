"""``streaming index DIR``: write the sidecar index of a directory whose files index themselves.

Some formats that index themselves must read much of every file to count its samples (WebDataset tars), or read
every file's footer (Parquet: one or two requests per file, slow on stores with high latency); their index builders
can also write a *sidecar index* beside the data, which later readers use instead of reading the files (any node,
any job). An index builder offers one by having ``sidecar(files, read, *, where) -> (name, bytes)``: the
file name relative to the directory and its content, computed from the files themselves (an existing sidecar is
ignored). This command lists the directory, picks the builder as streams do (``--format`` or detection), builds the
sidecar and writes it next to the files (uploaded for a remote directory). Formats without a sidecar are refused
by name.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from streaming_core.tools.commands._common import add_storage_option, storage_options

__all__ = ['add_parser', 'run', 'write_sidecar']


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'index', help='write the sidecar index of a directory of files that index themselves (WebDataset, Parquet)',
        description='Read the files of DIR (local or remote) once and write the sidecar index of their format next '
                    'to them (webdataset-index.json for WebDataset tars, parquet-index.json for Parquet files), so '
                    'streams skip reading every file to count its samples. Run it again after adding or replacing '
                    'files: a sidecar that does not cover a file is ignored for that file.')
    parser.add_argument('dataset', metavar='DIR', help='a directory of data files, or a remote URL of one')
    parser.add_argument('--format', default=None, metavar='NAME',
                        help='the index builder to use (default: detected from the files)')
    parser.add_argument('--json', action='store_true', help='print the result as JSON')
    add_storage_option(parser)
    parser.set_defaults(run=run)


def write_sidecar(dataset: str, *, fmt: str | None = None, options: dict[str, Any] | None = None,
                  timeout: float = 60.0, retries: int = 2) -> dict[str, Any]:
    """Build and write the sidecar index of the directory ``dataset``.

    Returns:
        ``{'sidecar': where it was written, 'format': builder name, 'files': files indexed, 'seconds': wall time}``.

    Raises:
        DerivedIndexError: nothing to index, or several formats and no ``fmt``.
        ValueError: the format has no sidecar index.
    """
    from streaming_core.reading.derived_index import choose_builder, list_source
    from streaming_core.storage.facade import is_remote, join, local_path, read_range, upload_file, write_file_atomic
    from streaming_core.storage.redact import redact_url
    started = time.monotonic()
    where = redact_url(dataset)
    files = list_source(dataset, timeout=timeout, retries=retries, options=options)
    name, builder, selected = choose_builder(fmt, files, where)
    make = getattr(builder, 'sidecar', None)
    if make is None:
        raise ValueError(f'The {name} format has no sidecar index: its streams index {where} cheaply from the '
                         f'files themselves, so there is nothing to write.')

    def read(file_name: str, start: int, length: int) -> bytes:
        return read_range(join(dataset, file_name), start, length, timeout=timeout, retries=retries, options=options)

    sidecar_name, data = make(selected, read, where=where)
    if is_remote(dataset):
        target = join(dataset, sidecar_name)
        with tempfile.TemporaryDirectory(prefix='streaming-index-') as scratch:
            path = os.path.join(scratch, os.path.basename(sidecar_name))
            with open(path, 'wb') as handle:
                handle.write(data)
            upload_file(path, target, timeout=timeout, retries=retries, options=options)
        shown = redact_url(target)
    else:
        target = os.path.join(local_path(dataset), *sidecar_name.split('/'))
        write_file_atomic(target, data)
        shown = target
    indexed = sum(1 for item in selected if item.name != sidecar_name)
    return {'sidecar': shown, 'format': name, 'files': indexed, 'seconds': round(time.monotonic() - started, 3)}


def run(args: argparse.Namespace) -> int:
    """Write the sidecar and report where."""
    result = write_sidecar(args.dataset, fmt=args.format, options=storage_options(args) or None)
    if args.json:
        print(json.dumps(result))
    else:
        print(f'Wrote {result["sidecar"]}: the {result["format"]} index of {result["files"]} file(s) in '
              f'{result["seconds"]:.1f} s')
    return 0
