"""LAION-400M: convert the parquet metadata plus the images downloaded by img2dataset to MDS.

Source layout: the metadata parquet files (``part-00000-....snappy.parquet``: ``SAMPLE_ID``, ``URL``, ``TEXT``,
``HEIGHT``, ``WIDTH``, ``LICENSE``, ``NSFW``, ``similarity``) and the folder img2dataset wrote with
``--output_format files``::

    laion400m-data/
        00000/000000000.jpg 000000000.txt 000000000.json  000000001.jpg ...
        00001/000010000.jpg ...

img2dataset numbers rows per metadata file: each file is cut into shards of ``samples_per_shard`` rows (10,000 by
default); shard ids continue from one file to the next; the key of a row is the shard id (5 digits, the folder
name) followed by the row's index in its shard (as many digits as ``samples_per_shard - 1`` has). Rows whose image
was not downloaded are skipped and counted. Metadata files without ``URL`` and ``TEXT`` columns, an images folder
without shard folders (the two swapped), and a run in which every row was skipped are refused, committing nothing.
An image no row maps to, or a row whose ``.json`` names another URL, stops the conversion (the files and the
metadata do not line up: check ``samples_per_shard``). Without metadata, the downloaded files alone are converted,
folder by folder, key by key.

Stored columns: ``key``, ``url``, ``caption`` (str: the ``.txt``, else ``TEXT``), ``width``, ``height`` (int: of
the stored image), ``image`` (bytes: the downloaded file, verbatim), ``metadata`` (json: the parquet row) and
``download`` (json: img2dataset's ``.json``, ``{}`` if absent).
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

from streaming_core.plugin_api import check_page_checksums
from streaming_datasets.cli import add_converter_parser, print_results, writer_options
from streaming_datasets.conversion import (
    ConversionResult,
    Skip,
    SourceLayoutError,
    SplitPlan,
    WriterOptions,
    convert_splits,
)

__all__ = ['convert_laion400m', 'metadata_items', 'check_images_folder', 'register', 'COLUMNS', 'IMAGE_EXTENSIONS',
           'METADATA_COLUMNS']

COLUMNS = {'key': 'str', 'url': 'str', 'caption': 'str', 'width': 'int', 'height': 'int', 'image': 'bytes',
           'metadata': 'json', 'download': 'json'}
IMAGE_EXTENSIONS = ('.jpg', '.png', '.webp', '.jpeg')
#: The columns every metadata parquet file must have (the row's image URL and caption).
METADATA_COLUMNS = ('URL', 'TEXT')
_cache: dict[str, Any] = {}


def _shard_digits(images: str) -> int:
    widths = {len(e.name) for e in os.scandir(images) if e.is_dir() and e.name.isdigit()}
    if len(widths) > 1:
        raise SourceLayoutError(f'{images}: shard folders have names of different widths {sorted(widths)}.')
    return widths.pop() if widths else 5


def metadata_items(metadata: Sequence[str], images: str, samples_per_shard: int = 10_000,
                   strict: bool = False) -> list[tuple[str, int, int, str, str, int, bool]]:
    """One item per img2dataset shard: ``(parquet file, first row, end row, folder, shard name, index digits,
    strict)``."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError('Reading the LAION metadata needs pyarrow: pip install pyarrow (or '
                          'streaming-datasets[laion]).') from None
    if samples_per_shard < 2:
        raise ValueError(f'samples_per_shard must be at least 2 (img2dataset\'s number_sample_per_shard), got '
                         f'{samples_per_shard}.')
    digits = _shard_digits(images)
    index_digits = len(str(samples_per_shard - 1))
    items, shard = [], 0
    for path in metadata:
        try:
            handle = pq.ParquetFile(path, page_checksum_verification=check_page_checksums())
            rows, names = handle.metadata.num_rows, handle.schema_arrow.names
        except (OSError, ValueError) as err:  # pyarrow.ArrowInvalid is a ValueError
            raise SourceLayoutError(f'LAION metadata {path} is not a readable parquet file: {err}') from err
        _check_metadata_columns(path, names)
        for start in range(0, rows, samples_per_shard):
            name = f'{shard:0{digits}d}'
            items.append((path, start, min(start + samples_per_shard, rows), os.path.join(images, name), name,
                          index_digits, strict))
            shard += 1
    return items


def _check_metadata_columns(path: str, names: Sequence[str]) -> None:
    """Refuse a parquet file that is not LAION metadata (it needs the ``URL`` and ``TEXT`` columns)."""
    missing = [name for name in METADATA_COLUMNS if name not in names]
    if not missing:
        return
    hint = ''
    if {'key', 'status'} <= set(names):
        hint = (' Its columns are those of the per-shard results img2dataset writes next to the downloaded images: '
                'did you swap the images folder and --metadata?')
    raise SourceLayoutError(f'{path} is not LAION metadata: it lacks the column(s) {missing} (its columns: '
                            f'{sorted(names)}). --metadata takes the LAION parquet files (SAMPLE_ID, URL, TEXT, ...) '
                            f'that img2dataset read as its url list.{hint}')


def check_images_folder(images: str) -> None:
    """Refuse an images folder that holds no img2dataset shard folder (``00000/``...), naming a likely swap."""
    if not os.path.isdir(images):
        raise SourceLayoutError(f'LAION image folder {images} is not a directory (img2dataset --output_format files '
                                f'output).')
    entries = list(os.scandir(images))
    if any(e.is_dir() and e.name.isdigit() for e in entries):
        return
    hint = ''
    if any(e.is_file() and e.name.endswith('.parquet') for e in entries):
        hint = (' It holds parquet files: is it the metadata folder? The images folder comes first, the metadata '
                'after --metadata.')
    raise SourceLayoutError(f'LAION image folder {images} holds no img2dataset shard folders (00000/, 00001/, ... '
                            f'written by img2dataset --output_format files).{hint}')


def _rows(path: str, start: int, stop: int) -> list[dict[str, Any]]:
    """Rows ``[start, stop)`` of a parquet file, reading only the row groups that hold them (the last read row
    groups stay cached: consecutive shards usually share them)."""
    import pyarrow.parquet as pq
    if _cache.get('path') != path:
        _cache.clear()
        handle = pq.ParquetFile(path, page_checksum_verification=True)
        bounds = [0]
        for group in range(handle.metadata.num_row_groups):
            bounds.append(bounds[-1] + handle.metadata.row_group(group).num_rows)
        _cache.update(path=path, file=handle, bounds=bounds)
    bounds = _cache['bounds']
    first, last = bisect.bisect_right(bounds, start) - 1, bisect.bisect_right(bounds, stop - 1) - 1
    if _cache.get('groups') != (first, last):
        _cache.update(groups=(first, last), table=_cache['file'].read_row_groups(list(range(first, last + 1))))
    return _cache['table'].slice(start - bounds[first], stop - start).to_pylist()


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode('utf-8', errors='replace')
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, 'isoformat'):
        return value.isoformat()
    return value


def _read(path: str) -> bytes | None:
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _sample(folder: str, key: str, row: dict[str, Any], strict: bool) -> dict[str, Any] | Skip:
    """The sample of one key (``row``: its metadata, ``{}`` without metadata)."""
    image = path = None
    for ext in IMAGE_EXTENSIONS:
        path = os.path.join(folder, key + ext)
        image = _read(path)
        if image is not None:
            break
    url = row.get('URL', row.get('url'))
    if image is None:
        reason = f'{key}: no downloaded image in {folder}' + (f' (url {url})' if url else '')
        if strict:
            raise SourceLayoutError(f'{reason}; strict mode converts only complete downloads (drop strict to skip '
                                    f'such rows).')
        return Skip(reason)
    raw_json = _read(os.path.join(folder, key + '.json'))
    try:
        download = json.loads(raw_json) if raw_json else {}
    except json.JSONDecodeError as err:
        raise SourceLayoutError(f'{folder}/{key}.json is not valid JSON: {err}') from err
    if url is not None and download.get('url') not in (None, url):
        raise SourceLayoutError(f'{folder}/{key}.json has url {download["url"]!r} but the metadata row for key {key} '
                                f'has {url!r}: the metadata and the downloaded files do not line up. Check '
                                f'samples_per_shard (img2dataset\'s number_sample_per_shard) and the order of the '
                                f'metadata files.')
    text = _read(os.path.join(folder, key + '.txt'))
    caption = text.decode('utf-8') if text is not None else row.get('TEXT', row.get('caption', download.get(
        'caption')))
    from PIL import Image, UnidentifiedImageError
    try:
        with Image.open(io.BytesIO(image)) as decoded:
            width, height = decoded.size
    except (UnidentifiedImageError, OSError) as err:
        return Skip(f'{key}: {path} is not a readable image ({err})')
    return {'key': key, 'url': str(url if url is not None else download.get('url', '')),
            'caption': '' if caption is None else str(caption), 'width': int(width), 'height': int(height),
            'image': image, 'metadata': _jsonable(row), 'download': _jsonable(download)}


def produce_laion_rows(items: Sequence[tuple[str, int, int, str, str, int, bool]]) -> Iterator[dict[str, Any] | Skip]:
    """Samples for metadata shards (see :func:`metadata_items`)."""
    for path, start, stop, folder, name, index_digits, strict in items:
        keys = [f'{name}{offset:0{index_digits}d}' for offset in range(stop - start)]
        present = _image_keys(folder) if os.path.isdir(folder) else set()
        stray = sorted(present - set(keys))
        if stray:
            raise SourceLayoutError(f'{folder} holds image {stray[0]} that no metadata row maps to (rows {start}..'
                                    f'{stop - 1} of {path} give keys {keys[0]}..{keys[-1]}): the metadata and the '
                                    f'downloaded files do not line up. Check samples_per_shard (img2dataset\'s '
                                    f'number_sample_per_shard) and the order of the metadata files.')
        for key, row in zip(keys, _rows(path, start, stop)):
            yield _sample(folder, key, row, strict)


def _image_keys(folder: str) -> set[str]:
    return {os.path.splitext(name)[0] for name in os.listdir(folder) if name.lower().endswith(IMAGE_EXTENSIONS)}


def produce_laion_files(items: Sequence[str]) -> Iterator[dict[str, Any] | Skip]:
    """Samples for downloaded shard folders alone (no metadata), keys in order."""
    for folder in items:
        for key in sorted(_image_keys(folder)):
            yield _sample(folder, key, {}, False)


def _metadata_files(metadata: Sequence[str] | str) -> list[str]:
    files: list[str] = []
    for entry in [metadata] if isinstance(metadata, str) else metadata:
        if os.path.isdir(entry):
            files.extend(sorted(os.path.join(entry, n) for n in os.listdir(entry) if n.endswith('.parquet')))
        elif os.path.isfile(entry):
            files.append(entry)
        else:
            raise SourceLayoutError(f'LAION metadata {entry} does not exist.')
    if not files:
        raise SourceLayoutError(f'No LAION metadata parquet files found in {metadata}.')
    return files


def convert_laion400m(images: str, out: str, *, metadata: Sequence[str] | str | None = None,
                      samples_per_shard: int = 10_000, split: str = 'train', strict: bool = False,
                      options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert LAION-400M (img2dataset files + optional metadata parquet) into ``out/<split>`` (MDS).

    Args:
        images: The img2dataset output folder (``00000/000000000.jpg`` ...).
        out: The output root (a directory or a remote URL).
        metadata: The metadata parquet file(s), or a folder of them, in img2dataset's input order (None: convert
            the downloaded files alone).
        samples_per_shard: img2dataset's ``number_sample_per_shard``.
        split: The output split name.
        strict: Raise (committing nothing) instead of skipping a metadata row whose image was not downloaded.
        options: Writer and parallelism options.

    Returns:
        ``{split: what was written}``.
    """
    check_images_folder(images)
    if metadata is None:
        items: list[Any] = sorted(e.path for e in os.scandir(images) if e.is_dir() and e.name.isdigit())
        plan = SplitPlan(split, items, produce_laion_files, COLUMNS, desc=f'LAION {split}', item_unit='folders')
    else:
        items = metadata_items(_metadata_files(metadata), images, samples_per_shard, strict)
        rows = sum(stop - start for _, start, stop, *_ in items)
        plan = SplitPlan(split, items, produce_laion_rows, COLUMNS, total=rows, desc=f'LAION {split}', unit='rows')
    return convert_splits([plan], out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('laion400m', convert_laion400m(
        args.images, args.out, metadata=args.metadata, samples_per_shard=args.samples_per_shard, split=args.split,
        strict=args.strict, options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert laion400m``."""
    parser = add_converter_parser(
        subparsers, 'laion400m', run=_run, help='convert LAION-400M (img2dataset files + parquet metadata) to MDS',
        description='Convert the images img2dataset downloaded (IMAGES/00000/000000000.jpg, .txt, .json) with the '
                    'LAION-400M parquet metadata (URL, TEXT, WIDTH, HEIGHT...) to MDS in OUT/<split>. Columns: '
                    'key, url, caption (str), width, height (int), image (bytes), metadata, download (json).')
    parser.add_argument('images', help='the img2dataset output folder')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--metadata', nargs='+', default=None, metavar='PARQUET',
                        help='metadata parquet file(s) or a folder of them, in img2dataset input order')
    parser.add_argument('--samples-per-shard', type=int, default=10_000,
                        help="img2dataset's number_sample_per_shard (default 10000)")
    parser.add_argument('--split', default='train', help='the output split name (default train)')
    parser.add_argument('--strict', action='store_true', help='fail when a row has no downloaded image')
