"""webdataset 1.0.2: writes tar shards with ``ShardWriter``, reads with ``WebDataset(...).decode()``.

Runs in ``.venv-ref``. Members per sample: ``id.cls`` (decoded to int by the default handlers), ``data.bin`` (left
as bytes) or ``image.npy`` (``np.load``). Shuffling is webdataset's own: shard shuffle plus a 1000-sample buffer.
DataLoader workers split the shards (``split_by_worker``). webdataset has no random access.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np
from common import PAYLOAD

NAME = 'webdataset'
SHUFFLE_BUFFER = 1000


def write(case: str, source: np.ndarray, out: str, size_limit: int, samples_per_shard: int) -> None:
    """Tar shards of ``samples_per_shard`` samples each (the MDS shards' sample count)."""
    import webdataset as wds
    os.makedirs(out, exist_ok=True)
    payload = PAYLOAD[case]
    member = 'data.bin' if payload == 'data' else 'image.npy'
    with wds.ShardWriter(os.path.join(out, 'shard-%06d.tar'), maxcount=samples_per_shard, maxsize=1 << 40,
                         verbose=0) as writer:
        for index in range(len(source)):
            value = source[index].tobytes() if payload == 'data' else np.ascontiguousarray(source[index])
            writer.write({'__key__': f'{index:09d}', 'id.cls': index, member: value})


def shard_names(path: str) -> list[str]:
    """The tar files of a local webdataset directory, in order."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(path, '*.tar')))


def _small(sample: dict[str, Any]) -> dict[str, Any]:
    return {'id': sample['id.cls'], 'data': sample['data.bin']}


def _image(sample: dict[str, Any]) -> dict[str, Any]:
    return {'id': sample['id.cls'], 'image': sample['image.npy']}


def dataset(case: str, path: str, *, shuffle: bool, batch_size: int, seed: int, remote: str | None = None,
            endpoint: str | None = None, shards: list[str] | None = None) -> Any:
    """A WebDataset pipeline over the local tars (or ``{endpoint}/{bucket/prefix}/<shard>`` over HTTP via curl)."""
    import webdataset as wds
    if remote:
        bucket_prefix = remote.split('://', 1)[1].rstrip('/')
        urls = [f'{endpoint}/{bucket_prefix}/{name}' for name in shards or []]
    else:
        urls = [os.path.join(path, name) for name in shard_names(path)]
    pipeline = wds.WebDataset(urls, shardshuffle=True if shuffle else False, seed=seed, empty_check=False)
    if shuffle:
        pipeline = pipeline.shuffle(SHUFFLE_BUFFER)
    return pipeline.decode().map(_small if case == 'small' else _image)
