"""``streaming convert webdataset SRC OUT``: WebDataset tars (a local directory or a remote URL) to MDS (or any
writable format), read through the same index builder and reader as streaming, in order.

Columns are ``__key__`` (``str``) and every field of the tars with the encoding of what the reader returns:
``str`` for text fields, ``int`` for class labels, ``json`` for JSON fields and ``bytes`` for the rest (images stay
their original bytes). ``__url__`` is left out. Every sample must have every field (a tar whose samples differ in
fields is refused by the writer, naming the missing column).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streaming_core.plugin_api import (
    add_writer_options,
    get_registry,
    parse_out,
    parse_size_limit,
    storage,
    storage_options,
)

__all__ = ['convert_webdataset', 'ConvertResult', 'add_parser', 'ENCODINGS']

#: MDS encoding of each field kind (see :func:`streaming_webdataset.reader.field_kind`).
ENCODINGS = {'bytes': 'bytes', 'str': 'str', 'int': 'int', 'json': 'json'}


@dataclass
class ConvertResult:
    """What a conversion wrote.

    Attributes:
        out: Where the dataset is.
        samples: Samples written.
        columns: ``{name: encoding}``.
        seconds: Wall time.
    """

    out: str
    samples: int
    columns: dict[str, str]
    seconds: float


def convert_webdataset(src: str, out: str | tuple[str, str], *, fmt: str = 'mds', compression: str | None = None,
                       hashes: list[str] | None = None, size_limit: int | str | None = 1 << 26,
                       exist_ok: bool = False, local: str | None = None, progress: bool = True,
                       options: Mapping[str, Any] | None = None,
                       on_sample: Callable[[int], None] | None = None) -> ConvertResult:
    """Convert the WebDataset tars of ``src`` into a dataset at ``out``, in order.

    Args:
        src: A local directory of tars or a remote URL.
        out: A local directory, a remote URL or a ``(local, remote)`` pair.
        fmt: The output shard format.
        compression: Shard compression (``'zstd'``...).
        hashes: Hashes to record per file.
        size_limit: The shard size limit.
        exist_ok: Replace a non-empty output.
        local: Where a remote ``src`` is cached (default: a temporary directory).
        progress: Show a progress bar.
        options: Storage options for ``src`` and ``out``.
        on_sample: Called with the number of samples written so far (tests, custom progress).
    """
    from streaming_core import StreamingDataset
    started = time.monotonic()
    options = dict(options or {})
    with tempfile.TemporaryDirectory(prefix='wds-convert-') as scratch:
        if storage.is_remote(src) or _has_gzipped(src):  # decompressed copies go to the scratch, not into src
            dataset = StreamingDataset(remote=src, local=local or scratch, batch_size=1, format='webdataset',
                                       storage_options=options or None)
        else:
            dataset = StreamingDataset(local=src, batch_size=1, format='webdataset')
        columns = {'__key__': 'str'}
        for reader in dataset.shards:
            for field, kind in getattr(reader, 'columns', []):
                columns.setdefault(field, ENCODINGS.get(kind, 'bytes'))
        if len(columns) == 1 and len(dataset):  # a sidecar index with counts only: the first sample's fields
            from streaming_webdataset.reader import field_kind
            for field in dataset[0]:
                if not field.startswith('__'):
                    columns[field] = ENCODINGS[field_kind(field)]
        writer_class = get_registry('format').get(fmt).writer
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=len(dataset), unit=' samples', desc='Converting webdataset', dynamic_ncols=True)
        count = 0
        try:
            with writer_class(columns=columns, out=out, compression=compression, hashes=hashes,
                              size_limit=size_limit, exist_ok=exist_ok, storage_options=options) as writer:
                for i in range(len(dataset)):
                    sample = dataset[i]
                    writer.write({name: sample[name] for name in columns})
                    count += 1
                    if bar is not None:
                        bar.update(1)
                    if on_sample is not None:
                        on_sample(count)
        finally:
            if bar is not None:
                bar.close()
    where = out if isinstance(out, str) else out[1]
    return ConvertResult(where, count, columns, time.monotonic() - started)


def _has_gzipped(directory: str) -> bool:
    """Whether the local ``directory`` holds a ``.tar.gz``/``.tgz`` (hidden directories left out)."""
    from streaming_webdataset.gzipped import is_gzipped
    for _, dirs, names in os.walk(directory):
        dirs[:] = [name for name in dirs if not name.startswith('.')]
        if any(is_gzipped(name) for name in names if not name.startswith('.')):
            return True
    return False


def add_parser(subparsers: Any) -> None:
    """Add ``streaming convert webdataset``."""
    parser = subparsers.add_parser(
        'webdataset', help='WebDataset .tar shards (a directory or URL) to a dataset',
        description='Convert a directory of WebDataset .tar shards (local or remote) into a streaming dataset (MDS '
                    'unless --format says otherwise), in order, through the same reader as streaming. Columns: '
                    '__key__ (str) and every field (text str, labels int, JSON json, the rest bytes).')
    parser.add_argument('src', metavar='SRC', help='a directory of .tar shards, or a remote URL of one')
    parser.add_argument('out', metavar='OUT', help='a local directory, a remote URL, or LOCAL::REMOTE')
    add_writer_options(parser, columns=False, workers=False, keep_local=False)
    parser.add_argument('--local', default=None, metavar='DIR', help='cache directory for a remote SRC')
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    out = parse_out(args.out)
    size = str(args.size_limit).strip()
    hashes = sorted(h.strip() for h in (args.hashes or '').split(',') if h.strip()) or None
    result = convert_webdataset(args.src, out, fmt=args.format, compression=args.compression, hashes=hashes,
                                size_limit=None if size in ('0', '') else parse_size_limit(size),
                                exist_ok=args.exist_ok, local=args.local, progress=not args.quiet,
                                options=storage_options(args))
    if not args.quiet:
        print(f'Wrote {result.samples} samples to {result.out}')
        print('Columns: ' + ', '.join(f'{name}:{encoding}' for name, encoding in result.columns.items()))
    return 0
