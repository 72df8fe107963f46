"""streaming-core ("ours"): writes MDS with ``streaming_mds.MDSWriter``, reads with ``streaming_core.StreamingDataset``.

Runs in ``.venv``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from common import COLUMNS, sample

NAME = 'ours'


def write(case: str, source: np.ndarray, out: str, size_limit: int, samples_per_shard: int) -> None:
    """Write the source as MDS (the format the reference reads too)."""
    from streaming_mds import MDSWriter
    with MDSWriter(columns=COLUMNS[case], out=out, size_limit=size_limit) as writer:
        for index in range(len(source)):
            writer.write(sample(case, source, index))


def dataset(case: str, path: str, *, shuffle: bool, batch_size: int, seed: int, remote: str | None = None,
            endpoint: str | None = None) -> Any:
    """An iterable dataset over the local MDS directory (or ``remote`` into the empty cache ``path``)."""
    from streaming_core import StreamingDataset
    options = {}
    if remote:
        options = {'storage_options': {'endpoint_url': endpoint, 'aws_access_key_id': 'testing',
                                       'aws_secret_access_key': 'testing', 'region': 'us-east-1'}}
    return StreamingDataset(local=path, remote=remote, batch_size=batch_size, shuffle=shuffle, shuffle_algo='py1e',
                            shuffle_seed=seed, **options)


def random_access(case: str, path: str) -> Any:
    """A dataset supporting ``ds[i]``."""
    from streaming_core import StreamingDataset
    return StreamingDataset(local=path, batch_size=1)
