"""``streaming convert litdata SRC OUT``: a local directory written by litdata's ``optimize`` to MDS (or any
writable format), item by item through the ``litdata`` reader, in litdata's order.

Items must be dicts. Each top-level key becomes a column whose encoding follows the first item's value: ``int``
(and ``bool``) to ``int``, ``float`` to ``float64``, ``str`` to ``str``, ``bytes`` to ``bytes``, NumPy arrays and
tensors to ``ndarray`` (tensors as NumPy arrays), JPEG images to ``jpeg`` and other PIL images to ``pil``, and dicts,
lists and tuples to ``json`` (tuples become lists).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from streaming_core.plugin_api import add_writer_options, get_registry, parse_out, parse_size_limit, storage_options

__all__ = ['convert_litdata', 'iter_items', 'local_chunk', 'encoding_of', 'add_parser']


def iter_items(src: str) -> Iterator[Any]:
    """Every item of the litdata dataset in the local directory ``src``, in order (whole-file zstd chunks are
    decompressed one at a time into a temporary directory, see :func:`local_chunk`)."""
    from streaming_litdata.builder import INDEX_NAME, convert_index
    from streaming_litdata.reader import LitdataFormat
    from streaming_litdata.sizes import local_reader
    path = os.path.join(src, INDEX_NAME)
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{src} has no index.json: give the directory litdata\'s optimize wrote.')
    with open(path, 'rb') as handle:
        index = convert_index(handle.read(), path, local_reader(src))
    fmt = LitdataFormat()
    with tempfile.TemporaryDirectory(prefix='litdata-chunks-') as scratch:
        for number, entry in enumerate(index['shards']):
            reader = fmt.reader(entry, where=f'{path} chunk {number}')
            chunk = local_chunk(src, entry, scratch)
            try:
                with reader.open([chunk]) as view:
                    yield from view.samples(range(len(view)))
            finally:
                if chunk.startswith(scratch):
                    os.remove(chunk)


def local_chunk(src: str, entry: dict[str, Any], scratch: str) -> str:
    """The local path of an index entry's chunk in the directory ``src``: its file, or for a whole-file zstd chunk
    (``zip_data``), its ``.zstd.bin`` decompressed into ``scratch`` (bounded by the decompressed size index.json
    records). A decompressed copy beside it is used only when the ``.zstd.bin`` is gone (litdata's reader leaves
    chunks so): next to it, the copy may be of a version the ``.zstd.bin`` has replaced since.

    Raises:
        ShardCorruptError: the ``.zstd.bin`` does not decompress to exactly that size (naming it).
    """
    from streaming_core.plugin_api import ShardCorruptError, decompress
    raw, zipped = entry['raw_data'], entry['zip_data']
    path = os.path.join(src, raw['basename'])
    source = os.path.join(src, zipped['basename']) if zipped is not None else path
    if zipped is None or (not os.path.isfile(source) and os.path.isfile(path) and
                          os.path.getsize(path) == raw['bytes']):
        return path
    with open(source, 'rb') as handle:
        try:
            data = decompress(entry['compression'], handle.read(), raw['bytes'])
        except ShardCorruptError as err:
            raise ShardCorruptError(f'{source}: {err}') from None
    if len(data) != raw['bytes']:
        raise ShardCorruptError(f'{source} decompresses to {len(data)} bytes, but index.json declares {raw["bytes"]} '
                                f'for it.')
    out = os.path.join(scratch, os.path.basename(raw['basename']))
    with open(out, 'wb') as handle:
        handle.write(data)
    return out


def encoding_of(value: Any, column: str) -> str:
    """The MDS encoding of a column from its first value (see the module docstring).

    Raises:
        ValueError: a value of another type (naming the column).
    """
    if isinstance(value, (bool, int)):
        return 'int'
    if isinstance(value, float):
        return 'float64'
    if isinstance(value, str):
        return 'str'
    if isinstance(value, bytes):
        return 'bytes'
    if isinstance(value, (dict, list, tuple)):
        return 'json'
    if hasattr(value, 'dtype') and hasattr(value, 'shape'):
        return 'ndarray'
    if hasattr(value, 'mode') and hasattr(value, 'getdata'):
        return 'jpeg' if getattr(value, 'format', None) == 'JPEG' else 'pil'
    raise ValueError(f'Column {column!r}: a {type(value).__name__} has no MDS encoding here.')


def _value(value: Any, encoding: str) -> Any:
    if encoding == 'ndarray' and not hasattr(value, 'tobytes'):
        return value.numpy()  # a tensor
    if encoding == 'json':
        return _jsonable(value)
    if encoding == 'int':
        return int(value)
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return value


def convert_litdata(src: str, out: str | tuple[str, str], *, fmt: str = 'mds', compression: str | None = None,
                    hashes: list[str] | None = None, size_limit: int | str | None = 1 << 26, exist_ok: bool = False,
                    progress: bool = True, options: dict[str, Any] | None = None) -> tuple[int, dict[str, str], float]:
    """Convert the litdata dataset in ``src`` into a dataset at ``out``; returns ``(samples, columns, seconds)``.

    Raises:
        ValueError: an item that is not a dict, or a value without an encoding.
    """
    started = time.monotonic()
    items = iter_items(src)
    first = next(items, None)
    if not isinstance(first, dict):
        raise ValueError(f'{src}: litdata items must be dicts to become columns, got {type(first).__name__}.')
    columns = {str(key): encoding_of(value, str(key)) for key, value in first.items()}
    writer_class = get_registry('format').get(fmt).writer
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(unit=' samples', desc='Converting litdata', dynamic_ncols=True)
    count = 0
    try:
        with writer_class(columns=columns, out=out, compression=compression, hashes=hashes, size_limit=size_limit,
                          exist_ok=exist_ok, storage_options=dict(options or {})) as writer:
            for item in _chain(first, items):
                writer.write({key: _value(item[key], enc) for key, enc in columns.items()})
                count += 1
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return count, columns, time.monotonic() - started


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def add_parser(subparsers: Any) -> None:
    """Add ``streaming convert litdata``."""
    parser = subparsers.add_parser(
        'litdata', help='a dataset written by litdata\'s optimize to a dataset',
        description='Convert a local directory written by litdata\'s optimize (index.json + chunk .bin files) into a '
                    'streaming dataset (MDS unless --format says otherwise), in order. Items must be dicts; each '
                    'key becomes a column.')
    parser.add_argument('src', metavar='SRC', help='the local directory litdata wrote')
    parser.add_argument('out', metavar='OUT', help='a local directory, a remote URL, or LOCAL::REMOTE')
    add_writer_options(parser, columns=False, workers=False, keep_local=False)
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    out = parse_out(args.out)
    size = str(args.size_limit).strip()
    hashes = sorted(h.strip() for h in (args.hashes or '').split(',') if h.strip()) or None
    count, columns, seconds = convert_litdata(
        args.src, out, fmt=args.format, compression=args.compression, hashes=hashes,
        size_limit=None if size in ('0', '') else parse_size_limit(size), exist_ok=args.exist_ok,
        progress=not args.quiet, options=storage_options(args))
    if not args.quiet:
        print(f'Wrote {count} samples in {seconds:.1f} s: {args.out}')
        print('Columns: ' + ', '.join(f'{name}:{encoding}' for name, encoding in columns.items()))
    return 0
