"""Test data for streaming-webdataset: real tar files in WebDataset layout written with :mod:`tarfile`, and the
samples read back from them with :mod:`tarfile` alone (an independent reading to compare against)."""

from __future__ import annotations

import io
import json
import os
import random
import tarfile
from typing import Any

__all__ = ['payload', 'members_of', 'write_tar', 'write_tars', 'read_with_tarfile', 'sample_id']


def payload(i: int, size: int = 300) -> bytes:
    """Deterministic JPEG-like bytes of sample ``i``."""
    rng = random.Random(i)
    return b'\xff\xd8\xff' + bytes(rng.getrandbits(8) for _ in range(size + i % 37))


def members_of(i: int) -> list[tuple[str, bytes]]:
    """The members of sample ``i``: an image, a class label, JSON metadata and a caption."""
    key = f'{i:06d}'
    meta = {'id': i, 'caption': f'caption {i}', 'tags': ['a', 'b'][: i % 3]}
    return [(f'{key}.jpg', payload(i)), (f'{key}.cls', str(i % 10).encode()),
            (f'{key}.json', json.dumps(meta).encode()), (f'{key}.txt', f'text of sample {i} \u00e9'.encode())]


def write_tar(path: str, members: list[tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT) -> None:
    """Write ``members`` (name, data) into the tar ``path`` in order."""
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with tarfile.open(path, 'w', format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))


def write_tars(directory: str, tars: int = 3, per_tar: int = 20, start: int = 0, prefix: str = 'shard') -> list[int]:
    """Write ``tars`` WebDataset tars of ``per_tar`` samples each (ids from ``start``); return the ids in order."""
    ids = []
    for t in range(tars):
        members = []
        for i in range(start + t * per_tar, start + (t + 1) * per_tar):
            members += members_of(i)
            ids.append(i)
        write_tar(os.path.join(directory, f'{prefix}-{start // per_tar + t:05d}.tar'), members)
    return ids


def _decode(field: str, data: bytes) -> Any:
    ext = field.rsplit('.', 1)[-1]
    if ext in ('json', 'jsn'):
        return json.loads(data)
    if ext in ('cls', 'cls2', 'class', 'count', 'index', 'inx', 'id'):
        return int(data)
    if ext in ('txt', 'text', 'transcript'):
        return data.decode('utf-8')
    return data


def read_with_tarfile(directory: str) -> list[dict[str, Any]]:
    """Every sample of the tars under ``directory`` (sorted by relative path) as read with :mod:`tarfile`: members
    grouped by key (the path up to the first dot of the last component), fields lowercased and decoded."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name.endswith('.tar'):
                found.append(os.path.relpath(os.path.join(root, name), directory).replace(os.sep, '/'))
    samples: list[dict[str, Any]] = []
    for rel in sorted(found):
        with tarfile.open(os.path.join(directory, rel)) as tar:
            current: dict[str, Any] | None = None
            for info in tar:
                if not info.isreg() or os.path.basename(info.name).startswith('__'):
                    continue
                head, _, base = info.name.rpartition('/')
                stem, _, field = base.partition('.')
                key = f'{head}/{stem}' if head else stem
                if current is None or current['__key__'] != key:
                    current = {'__key__': key, '__url__': rel}
                    samples.append(current)
                data = tar.extractfile(info).read()
                current[field.lower()] = _decode(field.lower(), data)
    return samples


def sample_id(sample: dict[str, Any]) -> int:
    """The id of a sample written by :func:`write_tars`."""
    return int(sample['json']['id'])
