"""ADE20K (SceneParsing / ADEChallengeData2016): convert images and segmentation masks to MDS.

Source layout (``ADEChallengeData2016.zip``, unpacked)::

    ADEChallengeData2016/
        images/training/ADE_train_00000001.jpg ...       annotations/training/ADE_train_00000001.png ...
        images/validation/ADE_val_00000001.jpg ...       annotations/validation/ADE_val_00000001.png ...

Every image needs the mask of the same name (``.png``). Source folders map to output splits ``training -> train``
and ``validation -> val`` (other names are kept); ``splits`` names output splits. Images are ordered by file
name. Stored columns (those of mosaicml-streaming's ADE20K, plus the name): ``x`` (jpeg: the file's bytes,
verbatim), ``y`` (png: the mask, lossless; pixel values are class ids 0..150, 0 = other), ``name`` (str, the file
stem).
"""

from __future__ import annotations

import argparse
import os
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

    Every split's image/mask pairs are listed and checked before any split is written.

    Args:
        source: The ``ADEChallengeData2016`` folder (holding ``images/`` and ``annotations/``).
        out: The output root (a directory or a remote URL).
        splits: Output splits (``train``, ``val``; default: one per folder of ``images/``). The source folder names
            ``training``/``validation`` are still accepted, with a deprecation warning.
        options: Writer and parallelism options.

    Returns:
        Output split name -> what was written.
    """
    images = os.path.join(source, 'images')
    if not os.path.isdir(images):
        raise SourceLayoutError(f'ADE20K source {source} has no images/ folder; give the ADEChallengeData2016 '
                                f'folder.')
    folders = sorted(e.name for e in os.scandir(images) if e.is_dir() and not e.name.startswith('.'))
    folder_of = {SPLIT_NAMES.get(folder, folder): folder for folder in folders}
    chosen = select_splits(splits, list(folder_of), dataset='ADE20K', aliases=SPLIT_NAMES,
                           unknown='ADE20K split {name!r} has no folder ' + images + '/<folder> (found splits: '
                                   '{found}; training -> train, validation -> val).')
    plans = []
    for name in chosen:
        pairs = list_pairs(source, folder_of[name])
        plans.append(SplitPlan(name, pairs, produce_ade20k, COLUMNS, total=len(pairs), desc=f'ADE20K {name}',
                               unit='images'))
    return convert_splits(plans, out, options)


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
    add_splits_argument(parser, 'train,val', old='training,validation')
