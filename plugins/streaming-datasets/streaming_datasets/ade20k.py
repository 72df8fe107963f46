"""ADE20K (SceneParsing / ADEChallengeData2016): convert images and segmentation masks to MDS.

Source layout (``ADEChallengeData2016.zip``, unpacked)::

    ADEChallengeData2016/
        images/training/ADE_train_00000001.jpg ...       annotations/training/ADE_train_00000001.png ...
        images/validation/ADE_val_00000001.jpg ...       annotations/validation/ADE_val_00000001.png ...

Every image needs the mask of the same name (``.png``). Source splits map to output splits ``training -> train``
and ``validation -> val`` (other names are kept). Images are ordered by file name. Stored columns (those of
mosaicml-streaming's ADE20K, plus the name): ``x`` (jpeg: the file's bytes, verbatim), ``y`` (png: the mask,
lossless; pixel values are class ids 0..150, 0 = other), ``name`` (str, the file stem).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from typing import Any

from streaming_core.storage import join
from streaming_datasets.cli import add_converter_parser, print_results, split_list, writer_options
from streaming_datasets.conversion import ConversionResult, SourceLayoutError, WriterOptions, convert_split

__all__ = ['convert_ade20k', 'list_pairs', 'register', 'COLUMNS', 'SPLIT_NAMES']

COLUMNS = {'x': 'jpeg', 'y': 'png', 'name': 'str'}
#: Source split folder -> output split name.
SPLIT_NAMES = {'training': 'train', 'validation': 'val'}
_IMAGE_EXTENSIONS = ('.jpg', '.jpeg')


def list_pairs(source: str, split: str) -> list[tuple[str, str, str]]:
    """``(image path, mask path, name)`` for every image of a source split, by file name."""
    images = os.path.join(source, 'images', split)
    masks = os.path.join(source, 'annotations', split)
    for folder in (images, masks):
        if not os.path.isdir(folder):
            raise SourceLayoutError(f'ADE20K folder {folder} does not exist: expected images/<split>/*.jpg and '
                                    f'annotations/<split>/*.png.')
    pairs, missing = [], []
    for name in sorted(os.listdir(images)):
        stem, ext = os.path.splitext(name)
        if name.startswith('.') or ext.lower() not in _IMAGE_EXTENSIONS:
            continue
        mask = os.path.join(masks, stem + '.png')
        if not os.path.isfile(mask):
            missing.append(stem + '.png')
        pairs.append((os.path.join(images, name), mask, stem))
    if missing:
        raise SourceLayoutError(f'{len(missing)} image(s) of {images} have no mask in {masks} (first: '
                                f'{missing[0]}). Every image needs annotations/{split}/<name>.png.')
    if not pairs:
        raise SourceLayoutError(f'{images} holds no .jpg images.')
    return pairs


def produce_ade20k(items: Sequence[tuple[str, str, str]]) -> Iterator[dict[str, Any]]:
    """Samples for ``(image path, mask path, name)`` items."""
    from PIL import Image, UnidentifiedImageError
    from PIL.JpegImagePlugin import JpegImageFile
    for image_path, mask_path, name in items:
        try:
            image, mask = Image.open(image_path), Image.open(mask_path)
        except (UnidentifiedImageError, OSError) as err:
            raise SourceLayoutError(f'ADE20K pair {name} is not readable: {err}') from err
        with image, mask:
            if not isinstance(image, JpegImageFile):
                image = image.convert('RGB')
            yield {'x': image, 'y': mask, 'name': name}


def convert_ade20k(source: str, out: str, *, splits: Sequence[str] | None = None,
                   options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert ADE20K into ``out/train`` and ``out/val`` (MDS).

    Args:
        source: The ``ADEChallengeData2016`` folder (holding ``images/`` and ``annotations/``).
        out: The output root (a directory or a remote URL).
        splits: Source split folders (default: every folder of ``images/``, e.g. training, validation).
        options: Writer and parallelism options.

    Returns:
        Output split name -> what was written.
    """
    images = os.path.join(source, 'images')
    if not os.path.isdir(images):
        raise SourceLayoutError(f'ADE20K source {source} has no images/ folder; give the ADEChallengeData2016 '
                                f'folder.')
    if splits is None:
        splits = sorted(e.name for e in os.scandir(images) if e.is_dir() and not e.name.startswith('.'))
    results = {}
    for split in splits:
        pairs = list_pairs(source, split)
        name = SPLIT_NAMES.get(split, split)
        results[name] = convert_split(pairs, produce_ade20k, COLUMNS, join(out, name), options, total=len(pairs),
                                      desc=f'ADE20K {name}')
    return results


def _run(args: argparse.Namespace) -> int:
    return print_results('ade20k', convert_ade20k(args.source, args.out, splits=args.splits,
                                                  options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert ade20k``."""
    parser = add_converter_parser(
        subparsers, 'ade20k', run=_run, help='convert ADE20K images + segmentation masks to MDS',
        description='Convert ADEChallengeData2016 (images/<split>/*.jpg, annotations/<split>/*.png) to MDS in '
                    'OUT/train and OUT/val. Columns: x (jpeg), y (png mask), name (str).')
    parser.add_argument('source', help='the ADEChallengeData2016 folder')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--splits', type=split_list, default=None,
                        help='comma-separated source split folders (default: all, e.g. training,validation)')
