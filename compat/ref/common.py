"""Helpers for the scripts that run inside the reference virtualenv (``.venv-ref``, mosaicml-streaming 0.13).

Every script puts the repository root on ``sys.path`` (so :mod:`compat.tagged` imports), reads one JSON request
file and writes one JSON result file. Nothing here imports streaming-core.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from compat import tagged  # noqa: E402

__all__ = ['ROOT', 'tagged', 'fresh', 'read_with_dataset', 'read_with_readers', 'load_request', 'dump_result',
           'versions', 'writer_class']


def fresh() -> None:
    """Release leftovers of previous datasets: collect garbage, then clean the reference's shared memory."""
    from streaming.base.util import clean_stale_shared_memory
    gc.collect()
    clean_stale_shared_memory()


def _copy(src: str) -> str:
    tmp = tempfile.mkdtemp(prefix='compat-ref-')
    dst = os.path.join(tmp, 'ds')
    shutil.copytree(src, dst)
    return dst


def read_with_dataset(path: str, **kwargs: Any) -> dict[str, Any]:
    """Read every sample of the dataset at ``path`` with the reference ``StreamingDataset``.

    The directory is copied first (the reference decompresses shards next to the index). Returns
    ``{'getitem': [...], 'iter': [...]}`` of :func:`compat.tagged.encode` forms: random access ``ds[i]`` over
    ``range(ds.size)`` and an unshuffled iteration in this process.
    """
    from streaming import StreamingDataset
    fresh()
    local = _copy(path)
    try:
        ds = StreamingDataset(local=local, batch_size=1, allow_unsafe_types=True, **kwargs)
        getitem = [tagged.encode(ds[i]) for i in range(ds.size)]
        iterated = [tagged.encode(sample) for sample in ds]
        del ds
        return {'getitem': getitem, 'iter': iterated}
    finally:
        shutil.rmtree(os.path.dirname(local), ignore_errors=True)
        fresh()


def read_with_readers(path: str) -> list[Any]:
    """Read every sample through the reference's shard readers directly (``reader_from_json``), shard by shard.

    Compressed parts are decompressed with the reference's ``decompress`` into a copy of the directory first.
    """
    from streaming.base.compression import decompress
    from streaming.base.format import reader_from_json
    local = _copy(path)
    try:
        with open(os.path.join(local, 'index.json')) as handle:
            index = json.load(handle)
        samples = []
        for entry in index['shards']:
            reader = reader_from_json(local, None, entry)
            reader.validate(True)
            for raw, zipped in reader.file_pairs:
                raw_path = os.path.join(local, raw.basename)
                if zipped is not None and not os.path.exists(raw_path):
                    with open(os.path.join(local, zipped.basename), 'rb') as handle:
                        data = decompress(reader.compression, handle.read())
                    with open(raw_path, 'wb') as handle:
                        handle.write(data)
            samples.extend(tagged.encode(reader.get_item(i)) for i in range(reader.samples))
        return samples
    finally:
        shutil.rmtree(os.path.dirname(local), ignore_errors=True)


def writer_class(name: str) -> Any:
    """The reference writer class of that name (``MDSWriter``, ``JSONWriter``, ``CSVWriter``, ...)."""
    import streaming
    return getattr(streaming, name)


def versions() -> dict[str, str]:
    """Versions of what decides the bytes: the reference, numpy, Pillow, the codec libraries, Python."""
    import platform

    import numpy
    import PIL
    import streaming
    out = {'streaming': streaming.__version__, 'numpy': numpy.__version__, 'pillow': PIL.__version__,
           'python': platform.python_version()}
    try:
        from PIL import features
        out['libjpeg'] = str(features.version('jpg'))
        out['zlib'] = str(features.version('zlib'))
    except Exception:  # pragma: no cover - informational only
        pass
    return out


def load_request() -> tuple[Any, str]:
    """``(request object, result path)`` from ``argv[1]`` (a JSON file) and ``argv[2]``."""
    if len(sys.argv) != 3:
        raise SystemExit(f'usage: {sys.argv[0]} REQUEST.json RESULT.json')
    with open(sys.argv[1]) as handle:
        return json.load(handle), sys.argv[2]


def dump_result(obj: Any, path: str) -> None:
    """Write the result JSON (strict: NaN must already be tagged)."""
    with open(path, 'w') as handle:
        json.dump(obj, handle, allow_nan=False)
