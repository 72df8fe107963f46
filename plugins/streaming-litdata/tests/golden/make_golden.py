"""Writes the golden litdata datasets of the streaming-litdata tests with litdata 0.2.76 itself, and what litdata
reads back from them.

Run it in a side virtualenv that has litdata (never in ``.venv``)::

    python3 -m venv /tmp/venv-litdata
    /tmp/venv-litdata/bin/pip install -c constraints.txt torch==2.13.0 litdata==0.2.76 pyarrow zstd
    /tmp/venv-litdata/bin/python plugins/streaming-litdata/tests/golden/make_golden.py

It writes, next to this file, ``mixed/`` (every data type litdata serializes: ints, floats, bools, str, bytes, 1-D
and n-D NumPy arrays and tensors, a PIL image, a JPEG, nested dicts, lists and tuples) ``rows/`` (plain dict
rows in the pytree layout) and ``arrow/`` (the same rows, which litdata with pyarrow stores only as an Arrow row
footer), ``mixed-zstd/`` and ``mixed-zstd-sample/`` (``mixed`` written with ``compression='zstd'``: framed zstd
chunks, litdata's default ``compression_level='batch'``, and one zstd frame per item, ``'sample'``),
``mixed-zstd-chunk/`` (whole-file zstd ``.zstd.bin`` chunks, ``compression_level='chunk'``), ``arrow-zstd/``
(binary-heavy plain rows written with ``compression='zstd'``: Arrow row footers litdata leaves uncompressed), and for
each ``expected.pkl``: every sample as litdata's ``StreamingDataset`` returns it, in :func:`canonical` form. The
tests compare our reading with those.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import sys
import tempfile
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = 40
CHUNK = 16
_JPEG_DIR = os.path.join(tempfile.gettempdir(), 'litdata-golden-jpegs')


def _jpeg_path(i: int) -> str:
    return os.path.join(_JPEG_DIR, f'{i:04d}.jpg')


def _write_jpegs() -> None:
    from PIL import Image
    os.makedirs(_JPEG_DIR, exist_ok=True)
    for i in range(SAMPLES):
        rng = np.random.default_rng(1000 + i)
        Image.fromarray(rng.integers(0, 255, (8, 6, 3)).astype(np.uint8)).save(_jpeg_path(i), quality=90)


def mixed(i: int) -> dict[str, Any]:
    """Sample ``i`` of ``mixed``."""
    import torch
    from PIL import Image
    rng = np.random.default_rng(i)
    if not os.path.exists(_jpeg_path(i)):  # the same JPEGs every time (seeded), in any process
        _write_jpegs()
    return {'id': i, 'score': i / 3, 'flag': i % 2 == 0, 'name': f'item {i} \u00e9',
            'blob': bytes([i % 256]) * (3 + i % 5),
            'vec': rng.standard_normal(3).astype(np.float32), 'mat': np.arange(6, dtype=np.int16).reshape(2, 3) * i,
            'tvec': torch.arange(4, dtype=torch.int64) * i, 'tmat': torch.ones(2, 2, dtype=torch.float32) * i,
            'image': Image.fromarray(rng.integers(0, 255, (5, 4, 3)).astype(np.uint8)),
            'photo': Image.open(_jpeg_path(i)),
            'nested': {'tags': [f't{i}', f'u{i}'], 'pair': (i, i + 1), 'meta': {'k': i, 'name': f'n{i}'}},
            'scores': [float(i), i / 2]}


def arrow(i: int) -> dict[str, Any]:
    """Sample ``i`` of ``arrow`` (plain values only: with pyarrow installed, litdata keeps such rows only in an
    Arrow IPC footer of each chunk)."""
    return {'id': i, 'text': f'row {i}', 'labels': [i, i + 1, i + 2]}


def blobs(i: int) -> dict[str, Any]:
    """Sample ``i`` of ``arrow-zstd``: mostly bytes (as the benchmark's JPEG-like rows), plain values only, so
    litdata keeps them in an Arrow row footer; written with ``compression='zstd'``, which litdata drops for such
    chunks (and, the rows being binary-heavy, for the IPC file too)."""
    return {'jpg': bytes([i % 256, 255 - i % 256]) * (100 + 7 * i), 'cls': i % 10, 'id': i, 'name': f'n{i} \u00e9',
            'empty': b''}


def rows(i: int) -> dict[str, Any]:
    """Sample ``i`` of ``rows``: the rows of :func:`arrow` in litdata's pytree layout (its Arrow footer turned off
    in the writing process, as when pyarrow is not installed)."""
    import litdata.streaming.item_loader as item_loader
    item_loader._PYARROW_AVAILABLE = False
    return arrow(i)


def canonical(value: Any) -> Any:
    """A comparable form: arrays and tensors as ``(kind, dtype, shape, bytes)``, images as ``('pixels', HWC
    uint8 bytes, shape)`` (a JPEG tensor from litdata is CHW), containers walked."""
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canonical(item) for item in value])
    if isinstance(value, np.ndarray):
        return ('ndarray', str(value.dtype), value.shape, value.tobytes())
    if type(value).__module__.startswith('torch'):
        array = value.numpy()
        if str(value.dtype) == 'torch.uint8' and value.dim() == 3 and value.shape[0] in (1, 3):  # a decoded JPEG
            shape = tuple(value.shape)
            return ('pixels', np.ascontiguousarray(array.transpose(1, 2, 0)).tobytes(), shape[1:] + shape[:1])
        return ('tensor', str(value.dtype), tuple(value.shape), array.tobytes())
    if hasattr(value, 'mode') and hasattr(value, 'size') and hasattr(value, 'getdata'):  # a PIL image
        array = np.asarray(value.convert('RGB'))
        return ('pixels', array.tobytes(), tuple(array.shape))
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _pil_jpeg_decoding() -> None:
    """litdata decodes JPEG leaves with torchvision.io, whose image extension does not load next to the CPU torch
    wheel in the side virtualenv; decode them as litdata's own EXIF branch does (PIL, then an RGB CHW tensor)."""
    import litdata.streaming.serializers as serializers
    import torch
    from PIL import Image

    def decode(data: bytes) -> Any:
        image = Image.open(io.BytesIO(bytes(data)))
        image.load()
        return torch.from_numpy(np.asarray(image.convert('RGB'))).permute(2, 0, 1).contiguous()
    serializers._decode_image_tensor = decode


def _write(name: str, fn: Any, root: str = HERE, **options: Any) -> None:
    from litdata import StreamingDataset, optimize
    _pil_jpeg_decoding()
    out = os.path.join(root, name)
    shutil.rmtree(out, ignore_errors=True)
    optimize(fn=fn, inputs=list(range(SAMPLES)), output_dir=out, chunk_size=CHUNK, num_workers=1, mode='overwrite',
             **options)
    with tempfile.TemporaryDirectory() as scratch:  # litdata's reader decompresses .zstd.bin chunks in place and
        copy = os.path.join(scratch, name)         # deletes them: read a copy, keep what optimize wrote
        shutil.copytree(out, copy)
        dataset = StreamingDataset(copy)
        expected = [canonical(dataset[i]) for i in range(len(dataset))]
    with open(os.path.join(root, f'{name}-expected.pkl'), 'wb') as handle:
        pickle.dump(expected, handle, protocol=4)
    print(f'{name}: {len(expected)} samples, files {sorted(os.listdir(out))}')


DATASETS: dict[str, tuple[Any, dict[str, Any]]] = {
    'mixed': (mixed, {}),
    'rows': (rows, {}),
    'arrow': (arrow, {}),
    'mixed-zstd': (mixed, {'compression': 'zstd'}),
    'mixed-zstd-sample': (mixed, {'compression': 'zstd', 'compression_level': 'sample'}),
    'mixed-zstd-chunk': (mixed, {'compression': 'zstd', 'compression_level': 'chunk'}),
    'arrow-zstd': (blobs, {'compression': 'zstd'}),
}


def main() -> None:
    """Write the datasets and their expected readings: all of them next to this file, or with ``--out DIR
    [--only NAME,...]`` the named ones into ``DIR`` (the tests write fresh ones with litdata this way)."""
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default=HERE, help='where to write (default: next to this file)')
    parser.add_argument('--only', default=','.join(DATASETS), help='comma-separated dataset names')
    args = parser.parse_args()
    sys.path.insert(0, HERE)
    _write_jpegs()
    for name in args.only.split(','):
        fn, options = DATASETS[name]
        _write(name, fn, args.out, **options)


if __name__ == '__main__':
    main()
