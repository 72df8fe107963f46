"""mosaicml-streaming 0.13 ("reference"): reads the same MDS shards as ours (a hard-linked copy of the directory).

Runs in ``.venv-ref``. The driver gives every reference process a private ``TMPDIR`` (it leaves lock files there),
and each dataset is preceded by ``clean_stale_shared_memory()``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

NAME = 'reference'

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
from compat.reference_guard import assert_reference_streaming  # noqa: E402

# A benchmark "against the reference" must measure mosaicml-streaming, never our streaming-compat package.
REFERENCE_PATH = assert_reference_streaming()


def _clean() -> None:
    from streaming.base.util import clean_stale_shared_memory
    clean_stale_shared_memory()


def dataset(case: str, path: str, *, shuffle: bool, batch_size: int, seed: int, remote: str | None = None,
            endpoint: str | None = None) -> Any:
    """The reference's StreamingDataset over the local MDS directory (or ``remote`` through ``S3_ENDPOINT_URL``)."""
    from streaming import StreamingDataset
    _clean()
    if remote:
        os.environ.update({'S3_ENDPOINT_URL': endpoint or '', 'AWS_ACCESS_KEY_ID': 'testing',
                           'AWS_SECRET_ACCESS_KEY': 'testing', 'AWS_DEFAULT_REGION': 'us-east-1'})
    return StreamingDataset(local=path, remote=remote, batch_size=batch_size, shuffle=shuffle, shuffle_algo='py1e',
                            shuffle_seed=seed)


def random_access(case: str, path: str) -> Any:
    """A dataset supporting ``ds[i]``."""
    from streaming import StreamingDataset
    _clean()
    return StreamingDataset(local=path, batch_size=1)
