"""ImageNet (ILSVRC-2012): convert the ``<split>/<wnid>/*.JPEG`` class-folder layout to MDS.

Source layout::

    imagenet/
        train/n01440764/n01440764_10026.JPEG ...   (1000 class folders named by WordNet id)
        val/n01440764/ILSVRC2012_val_00000293.JPEG ...

Labels follow torchvision's ``ImageFolder``: the index of the WordNet id in the sorted list of ``train``'s class
folders (or, without ``train``, of every split's folders), so ``val`` gets the same labels as ``train``. Images are
ordered by class, then file name. Stored columns (mosaicml-streaming's, plus the WordNet id): ``i`` (int),
``x`` (jpeg: the file's bytes, verbatim), ``y`` (int), ``wnid`` (str). A file that is not a JPEG (ImageNet's
train set has one PNG) is converted to RGB and saved as JPEG.
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

__all__ = ['convert_imagenet', 'list_classes', 'list_images', 'register', 'COLUMNS', 'IMAGE_EXTENSIONS']

COLUMNS = {'i': 'int', 'x': 'jpeg', 'y': 'int', 'wnid': 'str'}
IMAGE_EXTENSIONS = ('.jpeg', '.jpg', '.png')


def _subdirs(path: str) -> list[str]:
    return sorted(entry.name for entry in os.scandir(path) if entry.is_dir() and not entry.name.startswith('.'))


def list_classes(source: str, splits: Sequence[str]) -> list[str]:
    """The sorted WordNet ids: ``train``'s class folders when present, else every split's."""
    train = os.path.join(source, 'train')
    if os.path.isdir(train):
        classes = _subdirs(train)
    else:
        classes = sorted({wnid for split in splits for wnid in _subdirs(os.path.join(source, split))})
    if not classes:
        raise SourceLayoutError(f'No class folders found under {source}/<split>/: expected <split>/<wnid>/*.JPEG.')
    return classes


def list_images(source: str, split: str, classes: Sequence[str]) -> list[tuple[str, int, str]]:
    """``(path, label, wnid)`` for every image of a split, by class then file name."""
    root = os.path.join(source, split)
    if not os.path.isdir(root):
        raise SourceLayoutError(f'ImageNet split folder {root} does not exist.')
    loose = [e.name for e in os.scandir(root) if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS)]
    if loose:
        raise SourceLayoutError(f'{root} holds {len(loose)} images directly (e.g. {sorted(loose)[0]}); images must '
                                f'be in class folders {split}/<wnid>/. For the flat ILSVRC2012 validation archive, '
                                f'move each image into the folder of its ground-truth WordNet id first (see the '
                                f'ImageNet recipe docs).')
    label_of = {wnid: label for label, wnid in enumerate(classes)}
    images = []
    for wnid in _subdirs(root):
        if wnid not in label_of:
            raise SourceLayoutError(f'{root}/{wnid} is not one of the {len(classes)} training classes; every '
                                    f'split must use the class folders of train/.')
        folder = os.path.join(root, wnid)
        for name in sorted(os.listdir(folder)):
            if name.startswith('.'):
                continue
            if not name.lower().endswith(IMAGE_EXTENSIONS):
                raise SourceLayoutError(f'Unexpected file {folder}/{name}: class folders hold only images '
                                        f'({", ".join(IMAGE_EXTENSIONS)}).')
            images.append((os.path.join(folder, name), label_of[wnid], wnid))
    return images


def produce_imagenet(items: Sequence[tuple[str, int, str, int]]) -> Iterator[dict[str, Any]]:
    """Samples for ``(path, label, wnid, index)`` items; JPEG files are stored verbatim."""
    from PIL import Image, UnidentifiedImageError
    from PIL.JpegImagePlugin import JpegImageFile
    for path, label, wnid, index in items:
        try:
            image = Image.open(path)
        except (UnidentifiedImageError, OSError) as err:
            raise SourceLayoutError(f'{path} is not a readable image: {err}') from err
        with image:
            if not isinstance(image, JpegImageFile):
                image = image.convert('RGB')
            yield {'i': index, 'x': image, 'y': label, 'wnid': wnid}


def convert_imagenet(source: str, out: str, *, splits: Sequence[str] | None = None,
                     options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert ImageNet's class-folder layout into ``out/<split>`` (MDS).

    Every split is listed (and its layout checked: class folders, no loose images, no unknown class) before any is
    written, so a flat ``val/`` stops the run before ``train`` is converted.

    Args:
        source: The folder holding ``train/`` and ``val/``.
        out: The output root (a directory or a remote URL).
        splits: The output splits to convert, i.e. the folders of ``source`` (default: those of ``train``, ``val``
            that exist).
        options: Writer and parallelism options.

    Returns:
        Split name -> what was written.
    """
    if not os.path.isdir(source):
        raise SourceLayoutError(f'ImageNet source {source} is not a directory.')
    default = [s for s in ('train', 'val') if os.path.isdir(os.path.join(source, s))]
    if splits is None and not default:
        raise SourceLayoutError(f'{source} has neither train/ nor val/.')
    splits = select_splits(splits, _subdirs(source), dataset='ImageNet', default=default,
                           unknown='ImageNet split folder {name!r} does not exist in ' + source + ' (found: {found}).')
    classes = list_classes(source, splits)
    plans = []
    for split in splits:
        images = list_images(source, split, classes)
        items = [(path, label, wnid, i) for i, (path, label, wnid) in enumerate(images)]
        plans.append(SplitPlan(split, items, produce_imagenet, COLUMNS, total=len(items), desc=f'ImageNet {split}',
                               unit='images'))
    return convert_splits(plans, out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('imagenet', convert_imagenet(args.source, args.out, splits=args.splits,
                                                      options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert imagenet``."""
    parser = add_converter_parser(
        subparsers, 'imagenet', run=_run, help='convert ImageNet (train/<wnid>/*.JPEG folders) to MDS',
        description='Convert ImageNet in the class-folder layout (SOURCE/train/<wnid>/*.JPEG, '
                    'SOURCE/val/<wnid>/*.JPEG) to MDS in OUT/<split>. Columns: i (int), x (jpeg), y (int), '
                    'wnid (str); labels index the sorted train class folders.')
    parser.add_argument('source', help='the folder holding train/ and val/')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    add_splits_argument(parser, 'train,val')
