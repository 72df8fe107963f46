"""CIFAR-10: convert the python pickle batches (``cifar-10-batches-py``) or the binary ones (``-bin``) to MDS.

Source layouts (the "CIFAR-10 python version" and "CIFAR-10 binary version" archives, unpacked)::

    cifar-10-batches-py/                              cifar-10-batches-bin/
        data_batch_1 ... data_batch_5                     data_batch_1.bin ... data_batch_5.bin   -> 'train'
        test_batch                                        test_batch.bin                          -> 'val'
        batches.meta  (b'label_names')                    batches.meta.txt  (one name per line)

A python batch is a pickle of ``{b'data': uint8 array (N, 3072), b'labels': [N ints], b'filenames': [N bytes],
...}``; a binary batch is N records of 1 label byte followed by 3072 pixel bytes. Either way a row holds the 1024
red, then green, then blue values of a 32x32 image, and ``train`` is 50,000 images in batch order, ``val`` 10,000.
Stored columns (those of mosaicml-streaming's CIFAR-10, plus the file name): ``i`` (int, index in the split),
``x`` (pil), ``y`` (int), ``filename`` (str: the name from ``b'filenames'``; the binary version has none, so
``<batch>_<row>.png``, e.g. ``data_batch_1_00000.png``). Python batches are read with a restricted unpickler that
only rebuilds numpy arrays. The MATLAB version (``cifar-10-batches-mat``) is refused with a message saying so.
"""

from __future__ import annotations

import argparse
import os
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from streaming_datasets.cli import add_converter_parser, add_splits_argument, print_results, writer_options
from streaming_datasets.conversion import (
    ConversionResult,
    SourceLayoutError,
    SplitPlan,
    WriterOptions,
    convert_splits,
    select_splits,
)

__all__ = ['convert_cifar10', 'find_layout', 'read_batch', 'read_label_names', 'register', 'SPLITS', 'COLUMNS',
           'CLASSES', 'RECORD_BYTES']

#: Output split -> the batch files that make it, in order (the binary version adds ``.bin``).
SPLITS = {'train': [f'data_batch_{i}' for i in range(1, 6)], 'val': ['test_batch']}
#: Bytes of one record of the binary version: 1 label byte, then 3072 pixel bytes.
RECORD_BYTES = 1 + 3072
_LAYOUTS = {'python': ('', 'batches.meta'), 'binary': ('.bin', 'batches.meta.txt')}
_FOLDERS = {'cifar-10-batches-py': 'python', 'cifar-10-batches-bin': 'binary'}
COLUMNS = {'i': 'int', 'x': 'pil', 'y': 'int', 'filename': 'str'}
#: The ten class names, in label order (as in ``batches.meta``).
CLASSES = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck']

_ALLOWED = {('numpy.core.multiarray', '_reconstruct'), ('numpy._core.multiarray', '_reconstruct'),
            ('numpy', 'ndarray'), ('numpy', 'dtype'), ('numpy.core.multiarray', 'scalar'),
            ('numpy._core.multiarray', 'scalar'), ('_codecs', 'encode')}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, bytes and numpy arrays only (a CIFAR batch needs nothing else)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f'refusing to load {module}.{name}: a CIFAR-10 batch holds only numpy arrays, '
                                     f'lists and bytes')


def _load_pickle(path: str) -> Any:
    try:
        with open(path, 'rb') as handle:
            return _ArrayUnpickler(handle, encoding='bytes').load()
    except FileNotFoundError:
        raise SourceLayoutError(f'CIFAR-10 file {path} is missing. Point the converter at the unpacked '
                                f'cifar-10-batches-py directory (data_batch_1..5, test_batch, batches.meta).') from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise SourceLayoutError(f'{path} is not a CIFAR-10 python batch: {err}') from err


def find_layout(source: str) -> tuple[str, str]:
    """``(batch folder, 'python' or 'binary')`` of a CIFAR-10 source: the batches folder itself, or a folder holding
    ``cifar-10-batches-py``/``cifar-10-batches-bin``.

    Raises:
        SourceLayoutError: no CIFAR-10 batches are there (the MATLAB version and CIFAR-100 are named as such).
    """
    if not os.path.isdir(source):
        raise SourceLayoutError(f'CIFAR-10 source {source} is not a directory; give the unpacked '
                                f'cifar-10-batches-py (or cifar-10-batches-bin) directory.')
    names = set(os.listdir(source))
    for layout, (suffix, _) in _LAYOUTS.items():
        if any(f'{batch}{suffix}' in names for batches in SPLITS.values() for batch in batches):
            return source, layout
    for folder, layout in _FOLDERS.items():
        if os.path.isdir(os.path.join(source, folder)):
            return os.path.join(source, folder), layout
    if any(name.endswith('.mat') for name in names) or os.path.isdir(os.path.join(source, 'cifar-10-batches-mat')):
        raise SourceLayoutError(f'{source} holds the CIFAR-10 MATLAB version (.mat batches), which is not supported: '
                                f'download the python version (cifar-10-python.tar.gz) or the binary version '
                                f'(cifar-10-binary.tar.gz) and give its unpacked directory.')
    if {'train', 'test', 'meta'} <= names:
        raise SourceLayoutError(f'{source} looks like CIFAR-100 (train, test, meta), not CIFAR-10.')
    raise SourceLayoutError(f'{source} holds no CIFAR-10 batches. Supported layouts: the python version '
                            f'(cifar-10-batches-py: data_batch_1..5, test_batch, batches.meta) and the binary version '
                            f'(cifar-10-batches-bin: data_batch_1.bin..5.bin, test_batch.bin, batches.meta.txt).')


def read_batch(path: str) -> tuple[np.ndarray, list[int], list[str]]:
    """Read one batch file, python (a pickle) or binary (``.bin``): ``(data (N, 3072) uint8, labels, file names)``,
    validated."""
    if path.endswith('.bin'):
        return _read_binary_batch(path)
    batch = _load_pickle(path)
    if not isinstance(batch, dict) or not {b'data', b'labels'} <= set(batch):
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise SourceLayoutError(f'{path} is not a CIFAR-10 batch: expected the keys b\'data\' and b\'labels\', '
                                f'found {keys} (CIFAR-100 batches have b\'fine_labels\' instead).')
    data = np.asarray(batch[b'data'])
    labels = [int(label) for label in batch[b'labels']]
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise SourceLayoutError(f'{path}: b\'data\' must be a uint8 array of shape ({len(labels)}, 3072), got '
                                f'{data.dtype} {data.shape}.')
    if any(not 0 <= label < 10 for label in labels):
        raise SourceLayoutError(f'{path}: labels must be in 0..9.')
    names = batch.get(b'filenames')
    if names is None:
        filenames = [f'{os.path.basename(path)}_{row:05d}.png' for row in range(len(labels))]
    else:
        filenames = [n.decode('utf-8') if isinstance(n, bytes) else str(n) for n in names]
        if len(filenames) != len(labels):
            raise SourceLayoutError(f'{path}: {len(filenames)} file names for {len(labels)} images.')
    return data, labels, filenames


def _read_binary_batch(path: str) -> tuple[np.ndarray, list[int], list[str]]:
    """A batch of the binary version: records of 1 label byte and 3072 pixel bytes."""
    try:
        raw = np.fromfile(path, dtype=np.uint8)
    except FileNotFoundError:
        raise SourceLayoutError(f'CIFAR-10 file {path} is missing. Point the converter at the unpacked '
                                f'cifar-10-batches-bin directory (data_batch_1.bin..5.bin, test_batch.bin).') from None
    if raw.size == 0 or raw.size % RECORD_BYTES:
        raise SourceLayoutError(f'{path} is not a CIFAR-10 binary batch: its {raw.size} bytes are not a whole number '
                                f'of {RECORD_BYTES}-byte records (1 label byte + 3072 pixel bytes; CIFAR-100 binary '
                                f'records have 2 label bytes).')
    records = raw.reshape(-1, RECORD_BYTES)
    labels = [int(label) for label in records[:, 0]]
    if any(label > 9 for label in labels):
        raise SourceLayoutError(f'{path}: labels must be in 0..9 (is it CIFAR-100?).')
    stem = os.path.basename(path)[:-len('.bin')]
    return np.ascontiguousarray(records[:, 1:]), labels, [f'{stem}_{row:05d}.png' for row in range(len(labels))]


def read_label_names(source: str) -> list[str]:
    """The class names from ``batches.meta`` or ``batches.meta.txt`` (the standard ten when absent)."""
    text = os.path.join(source, 'batches.meta.txt')
    if os.path.exists(text):
        with open(text, encoding='utf-8') as handle:
            names = [line.strip() for line in handle if line.strip()]
        if len(names) != 10:
            raise SourceLayoutError(f'{text} names {len(names)} classes; CIFAR-10 has 10.')
        return names
    path = os.path.join(source, 'batches.meta')
    if not os.path.exists(path):
        return list(CLASSES)
    meta = _load_pickle(path)
    names = meta.get(b'label_names') if isinstance(meta, dict) else None
    if not names:
        raise SourceLayoutError(f'{path} has no b\'label_names\'.')
    return [n.decode('utf-8') if isinstance(n, bytes) else str(n) for n in names]


def _image(row: np.ndarray) -> Any:
    from PIL import Image
    return Image.fromarray(np.ascontiguousarray(row.reshape(3, 32, 32).transpose(1, 2, 0)), 'RGB')


def produce_cifar10(items: Sequence[tuple[str, int, int]]) -> Iterator[dict[str, Any]]:
    """Samples for ``(batch path, row, index in split)`` items (each batch is read once)."""
    loaded: tuple[str, Any] | None = None
    for path, row, index in items:
        if loaded is None or loaded[0] != path:
            loaded = (path, read_batch(path))
        data, labels, filenames = loaded[1]
        yield {'i': index, 'x': _image(data[row]), 'y': labels[row], 'filename': filenames[row]}


def convert_cifar10(source: str, out: str, *, splits: Sequence[str] | None = None,
                    options: WriterOptions | None = None) -> dict[str, ConversionResult]:
    """Convert ``cifar-10-batches-py`` or ``cifar-10-batches-bin`` into ``out/train`` and ``out/val`` (MDS).

    Every batch of every split is read and checked before any split is written.

    Args:
        source: The unpacked batches directory (python or binary version), or the folder holding it.
        out: The output root (a directory or a remote URL); each split goes to ``out/<split>``.
        splits: The output splits to write (default both: ``train`` from ``data_batch_1..5``, ``val`` from
            ``test_batch``).
        options: Writer and parallelism options.

    Returns:
        Split name -> what was written.
    """
    folder, layout = find_layout(source)
    suffix = _LAYOUTS[layout][0]
    read_label_names(folder)  # validates batches.meta(.txt) when present
    plans = []
    for split in select_splits(splits, list(SPLITS), dataset='CIFAR-10',
                               unknown='Unknown CIFAR-10 split {name!r}; expected one of: {found}.'):
        items = []
        for name in SPLITS[split]:
            path = os.path.join(folder, name + suffix)
            _, labels, _ = read_batch(path)
            base = len(items)
            items.extend((path, row, base + row) for row in range(len(labels)))
        plans.append(SplitPlan(split, items, produce_cifar10, COLUMNS, total=len(items), desc=f'CIFAR-10 {split}',
                               unit='images'))
    return convert_splits(plans, out, options)


def _run(args: argparse.Namespace) -> int:
    return print_results('cifar10', convert_cifar10(args.source, args.out, splits=args.splits,
                                                    options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert cifar10``."""
    parser = add_converter_parser(
        subparsers, 'cifar10', run=_run, help='convert CIFAR-10 (python or binary batches) to MDS',
        description='Convert the unpacked cifar-10-batches-py directory (data_batch_1..5, test_batch) or '
                    'cifar-10-batches-bin directory (data_batch_1.bin..5.bin, test_batch.bin) to MDS in OUT/train '
                    'and OUT/val. Columns: i (int), x (pil), y (int), filename (str).')
    parser.add_argument('source', help='the cifar-10-batches-py or cifar-10-batches-bin directory')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    add_splits_argument(parser, 'train,val')
