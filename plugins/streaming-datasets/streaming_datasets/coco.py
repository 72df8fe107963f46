"""COCO (instances): convert the images and ``annotations/instances_<split>.json`` to MDS.

Source layout (the official 2017 release, unpacked)::

    coco/
        annotations/instances_train2017.json   instances_val2017.json
        train2017/000000000009.jpg ...
        val2017/000000000139.jpg ...

(``images/<split>/`` is accepted in place of ``<split>/``.) One sample per entry of the annotation file's
``images`` list, in that order, images without annotations included. Stored columns: ``image`` (jpeg: the file's
bytes, verbatim), ``image_id``, ``width``, ``height`` (int), ``file_name`` (str), and per annotation of the image,
in file order: ``boxes`` (json: ``[x, y, w, h]`` each), ``category_ids`` (json), ``segmentation`` (json: polygons
or RLE, as in the file) and ``annotations`` (json: the remaining fields: ``id``, ``area``, ``iscrowd``...).
"""

from __future__ import annotations

import argparse
import json
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

__all__ = ['convert_coco', 'load_instances', 'find_splits', 'register', 'COLUMNS', 'SPLIT_FIELDS']

COLUMNS = {'image': 'jpeg', 'image_id': 'int', 'file_name': 'str', 'width': 'int', 'height': 'int',
           'boxes': 'json', 'category_ids': 'json', 'segmentation': 'json', 'annotations': 'json'}
#: The annotation fields stored in their own columns (the rest go to ``annotations``).
SPLIT_FIELDS = ('image_id', 'bbox', 'category_id', 'segmentation')
_PREFIX, _SUFFIX = 'instances_', '.json'


def find_splits(source: str) -> list[str]:
    """The splits that have an ``annotations/instances_<split>.json``."""
    folder = os.path.join(source, 'annotations')
    if not os.path.isdir(folder):
        raise SourceLayoutError(f'{folder} does not exist: COCO needs annotations/instances_<split>.json.')
    splits = sorted(name[len(_PREFIX):-len(_SUFFIX)] for name in os.listdir(folder)
                    if name.startswith(_PREFIX) and name.endswith(_SUFFIX))
    if not splits:
        raise SourceLayoutError(f'{folder} holds no instances_<split>.json file.')
    return splits


def _image_folder(source: str, split: str) -> str:
    for folder in (os.path.join(source, split), os.path.join(source, 'images', split)):
        if os.path.isdir(folder):
            return folder
    raise SourceLayoutError(f'COCO images of split {split!r} not found: expected {source}/{split}/ or '
                            f'{source}/images/{split}/.')


def load_instances(path: str) -> tuple[list[dict[str, Any]], dict[int, list[dict[str, Any]]]]:
    """``(images, annotations by image id)`` from an instances file, validated, in file order."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise SourceLayoutError(f'COCO annotation file {path} does not exist.') from None
    except json.JSONDecodeError as err:
        raise SourceLayoutError(f'{path} is not valid JSON: {err}') from err
    if not isinstance(data, dict) or not isinstance(data.get('images'), list) \
            or not isinstance(data.get('annotations'), list):
        raise SourceLayoutError(f'{path} is not a COCO instances file: it needs "images" and "annotations" lists.')
    images = data['images']
    by_image: dict[int, list[dict[str, Any]]] = {}
    for n, image in enumerate(images):
        missing = [key for key in ('id', 'file_name', 'width', 'height') if key not in image]
        if missing:
            raise SourceLayoutError(f'{path}: images[{n}] lacks {missing}.')
        if image['id'] in by_image:
            raise SourceLayoutError(f'{path}: image id {image["id"]} appears twice in "images".')
        by_image[image['id']] = []
    for n, ann in enumerate(data['annotations']):
        missing = [key for key in ('image_id', 'bbox', 'category_id') if key not in ann]
        if missing:
            raise SourceLayoutError(f'{path}: annotations[{n}] lacks {missing}.')
        if ann['image_id'] not in by_image:
            raise SourceLayoutError(f'{path}: annotations[{n}] names image id {ann["image_id"]}, which is not in '
                                    f'"images".')
        by_image[ann['image_id']].append(ann)
    return images, by_image


def produce_coco(items: Sequence[tuple[str, dict[str, Any], list[dict[str, Any]]]]) -> Iterator[dict[str, Any]]:
    """Samples for ``(image path, image record, annotations)`` items."""
    from PIL import Image, UnidentifiedImageError
    from PIL.JpegImagePlugin import JpegImageFile
    for path, record, anns in items:
        try:
            image = Image.open(path)
        except FileNotFoundError:
            raise SourceLayoutError(f'COCO image {path} (image id {record["id"]}) is missing.') from None
        except (UnidentifiedImageError, OSError) as err:
            raise SourceLayoutError(f'{path} is not a readable image: {err}') from err
        with image:
            if not isinstance(image, JpegImageFile):
                image = image.convert('RGB')
            yield {'image': image, 'image_id': int(record['id']), 'file_name': str(record['file_name']),
                   'width': int(record['width']), 'height': int(record['height']),
                   'boxes': [ann['bbox'] for ann in anns], 'category_ids': [ann['category_id'] for ann in anns],
                   'segmentation': [ann.get('segmentation') for ann in anns],
                   'annotations': [{k: v for k, v in ann.items() if k not in SPLIT_FIELDS} for ann in anns]}


def convert_coco(source: str, out: str, *, splits: Sequence[str] | None = None,
                 options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert COCO instances into ``out/<split>`` (MDS).

    Every split's annotation file is read and every image it names is found before any split is written.

    Args:
        source: The folder holding ``annotations/`` and the image folders.
        out: The output root (a directory or a remote URL).
        splits: The output splits, named as the annotation files (``train2017``...; default: every
            ``annotations/instances_<split>.json``).
        options: Writer and parallelism options.

    Returns:
        Split name -> what was written.
    """
    if not os.path.isdir(source):
        raise SourceLayoutError(f'COCO source {source} is not a directory.')
    chosen = select_splits(splits, find_splits(source), dataset='COCO',
                           unknown='COCO split {name!r} has no annotations/instances_{name}.json in ' + source +
                                   ' (found splits: {found}).')
    plans = []
    for split in chosen:
        images, by_image = load_instances(os.path.join(source, 'annotations', f'{_PREFIX}{split}{_SUFFIX}'))
        folder = _image_folder(source, split)
        items = [(os.path.join(folder, image['file_name']), image, by_image[image['id']]) for image in images]
        missing = [(path, record['id']) for path, record, _ in items if not os.path.isfile(path)]
        if missing:
            raise SourceLayoutError(f'COCO image {missing[0][0]} (image id {missing[0][1]}) is missing, and '
                                    f'{len(missing) - 1} other image(s) of split {split!r}: every image of '
                                    f'instances_{split}.json must be in {folder}.')
        plans.append(SplitPlan(split, items, produce_coco, COLUMNS, total=len(items), desc=f'COCO {split}',
                               unit='images'))
    return convert_splits(plans, out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('coco', convert_coco(args.source, args.out, splits=args.splits,
                                              options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert coco``."""
    parser = add_converter_parser(
        subparsers, 'coco', run=_run, help='convert COCO images + instances annotations to MDS',
        description='Convert COCO (SOURCE/<split>/*.jpg and SOURCE/annotations/instances_<split>.json) to MDS in '
                    'OUT/<split>. Columns: image (jpeg), image_id, width, height (int), file_name (str), boxes, '
                    'category_ids, segmentation, annotations (json).')
    parser.add_argument('source', help='the folder holding annotations/ and the image folders')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    add_splits_argument(parser, 'one per annotations/instances_<split>.json, e.g. train2017,val2017')
