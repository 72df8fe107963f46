"""CIFAR-10: convert the python pickle batches (``cifar-10-batches-py``) to MDS.

Source layout (the "CIFAR-10 python version" archive, unpacked)::

    cifar-10-batches-py/
        data_batch_1 ... data_batch_5    -> split 'train' (50,000 images, in batch order)
        test_batch                       -> split 'val'   (10,000 images)
        batches.meta                     (b'label_names')

Each batch is a pickle of ``{b'data': uint8 array (N, 3072), b'labels': [N ints], b'filenames': [N bytes], ...}``;
a row holds the 1024 red, then green, then blue values of a 32x32 image. Stored columns (those of
mosaicml-streaming's CIFAR-10, plus the file name): ``i`` (int, index in the split), ``x`` (pil), ``y`` (int),
``filename`` (str). Batches are read with a restricted unpickler that only rebuilds numpy arrays.
"""

from __future__ import annotations

import argparse
import os
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from streaming_core.storage import join
from streaming_datasets.cli import add_converter_parser, print_results, split_list, writer_options
from streaming_datasets.conversion import ConversionResult, SourceLayoutError, WriterOptions, convert_split

__all__ = ['convert_cifar10', 'read_batch', 'read_label_names', 'register', 'SPLITS', 'COLUMNS', 'CLASSES']

#: Output split -> the batch files that make it, in order.
SPLITS = {'train': [f'data_batch_{i}' for i in range(1, 6)], 'val': ['test_batch']}
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


def read_batch(path: str) -> tuple[np.ndarray, list[int], list[str]]:
    """Read one batch file: ``(data (N, 3072) uint8, labels, file names)``, validated."""
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


def read_label_names(source: str) -> list[str]:
    """The class names from ``batches.meta`` (the standard ten when the file is absent)."""
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
    """Convert ``cifar-10-batches-py`` into ``out/train`` and ``out/val`` (MDS).

    Args:
        source: The unpacked ``cifar-10-batches-py`` directory.
        out: The output root (a directory or a remote URL); each split goes to ``out/<split>``.
        splits: The splits to write (default both: ``train`` from ``data_batch_1..5``, ``val`` from ``test_batch``).
        options: Writer and parallelism options.

    Returns:
        Split name -> what was written.
    """
    if not os.path.isdir(source):
        raise SourceLayoutError(f'CIFAR-10 source {source} is not a directory; give the unpacked '
                                f'cifar-10-batches-py directory.')
    read_label_names(source)  # validates batches.meta when present
    results = {}
    for split in splits or list(SPLITS):
        if split not in SPLITS:
            raise ValueError(f'Unknown CIFAR-10 split {split!r}; expected one of {list(SPLITS)}.')
        items = []
        for name in SPLITS[split]:
            path = os.path.join(source, name)
            _, labels, _ = read_batch(path)
            base = len(items)
            items.extend((path, row, base + row) for row in range(len(labels)))
        results[split] = convert_split(items, produce_cifar10, COLUMNS, join(out, split), options,
                                       total=len(items), desc=f'CIFAR-10 {split}')
    return results


def _run(args: argparse.Namespace) -> int:
    return print_results('cifar10', convert_cifar10(args.source, args.out, splits=args.splits,
                                                    options=writer_options(args)))


def register(subparsers: Any) -> None:
    """Add ``streaming convert cifar10``."""
    parser = add_converter_parser(
        subparsers, 'cifar10', run=_run, help='convert CIFAR-10 (python pickle batches) to MDS',
        description='Convert the unpacked cifar-10-batches-py directory (data_batch_1..5, test_batch) to MDS in '
                    'OUT/train and OUT/val. Columns: i (int), x (pil), y (int), filename (str).')
    parser.add_argument('source', help='the cifar-10-batches-py directory')
    parser.add_argument('out', help='output root: a directory or a remote URL')
    parser.add_argument('--splits', type=split_list, default=None, help='comma-separated subset of train,val')
