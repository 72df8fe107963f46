"""litdata 0.2.76: writes its ``optimize`` output, reads with ``litdata.StreamingDataset`` (its own shuffle).

Runs in ``.venv-ref``. litdata returns ``bytes`` fields as ``memoryview``, which ``default_collate`` would turn into
one tensor per byte position and which cannot be pickled out of DataLoader workers: a ``transform`` (litdata's
own hook, applied per item inside the workers) turns them into ``bytes``, as the other libraries return.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

import numpy as np
from common import PAYLOAD, load_source, sample

NAME = 'litdata'
_SOURCE: dict[str, np.ndarray] = {}


def _item(case: str, source_path: str, index: int) -> dict[str, Any]:
    source = _SOURCE.get(source_path)
    if source is None:
        source = _SOURCE[source_path] = load_source(source_path)
    return sample(case, source, index)


def write(case: str, source: np.ndarray, out: str, size_limit: int, samples_per_shard: int,
          source_path: str = '') -> None:
    """``litdata.optimize`` with one worker and ``chunk_size=samples_per_shard`` (the MDS shards' sample count)."""
    from litdata import optimize
    logging.getLogger('litdata').setLevel(logging.ERROR)
    optimize(fn=functools.partial(_item, case, source_path), inputs=list(range(len(source))), output_dir=out,
             chunk_size=samples_per_shard, num_workers=1, reorder_files=False, verbose=False, mode='overwrite',
             start_method='fork')


def _bytes_field(item: dict[str, Any]) -> dict[str, Any]:
    data = item.get('data')
    if data is not None and type(data) is not bytes:
        item['data'] = bytes(data)
    return item


def _allow_plain_http() -> None:
    """Let litdata's obstore path talk to an ``http://`` endpoint (the loopback server).

    litdata downloads chunks through obstore when it is installed, and obstore refuses plain HTTP unless its client
    options say ``allow_http``; litdata passes no such option (on AWS everything is HTTPS). Adding it to litdata's
    module-level client options keeps the same download path it would use against a real HTTPS endpoint.
    """
    from litdata.streaming import downloader
    options = getattr(downloader, '_OBSTORE_CLIENT_OPTIONS', None)
    if isinstance(options, dict):
        options['allow_http'] = 'true'


def dataset(case: str, path: str, *, shuffle: bool, batch_size: int, seed: int, remote: str | None = None,
            endpoint: str | None = None) -> Any:
    """litdata's StreamingDataset over the ``optimize`` output (or ``remote`` with ``path`` as its cache)."""
    from litdata import StreamingDataset
    transform = _bytes_field if PAYLOAD[case] == 'data' else None
    if remote:
        _allow_plain_http()
        options = {'endpoint_url': endpoint, 'aws_access_key_id': 'testing', 'aws_secret_access_key': 'testing',
                   'region_name': 'us-east-1'}
        return StreamingDataset(remote, cache_dir=path, shuffle=shuffle, seed=seed, transform=transform,
                                storage_options=options)
    os.environ.setdefault('DATA_OPTIMIZER_CACHE_FOLDER', os.path.join(os.environ.get('TMPDIR', '/tmp'), 'litdata'))
    return StreamingDataset(path, shuffle=shuffle, seed=seed, transform=transform)


def random_access(case: str, path: str) -> Any:
    """litdata's StreamingDataset (``ds[i]`` is supported)."""
    return dataset(case, path, shuffle=False, batch_size=1, seed=0)
