"""``streaming.base.shuffle``: the reference's shuffle functions over streaming-core's shuffle registry.

``get_shuffle(algo, ...)`` runs the algorithm registered under ``algo`` (the builtin ``naive`` and the py1e
plugin's ``py1e``/``py1br``/``py1s``/``py2s``/``py1b``, or any third-party one); ``get_shuffle_<algo>`` are the same
for one name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from streaming_core.machinery.lookup import get_registry

__all__ = ['get_shuffle', 'get_shuffle_naive', 'get_shuffle_py1br', 'get_shuffle_py1e', 'get_shuffle_py1s',
           'get_shuffle_py2s', 'algos']


def get_shuffle(algo: str, shard_sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                block_size: int = 1 << 18) -> NDArray[np.int64]:
    """The shuffled sample order of one epoch (the reference's signature and results)."""
    return get_registry('shuffle').get(algo)(np.asarray(shard_sizes, np.int64), num_canonical_nodes, seed, epoch,
                                             block_size)


def _one(algo: str) -> Any:
    def shuffle(shard_sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                block_size: int = 1 << 18) -> NDArray[np.int64]:
        return get_shuffle(algo, shard_sizes, num_canonical_nodes, seed, epoch, block_size)
    shuffle.__name__ = shuffle.__qualname__ = f'get_shuffle_{algo}'
    shuffle.__doc__ = f'The ``{algo}`` shuffle (see :func:`get_shuffle`).'
    return shuffle


get_shuffle_naive = _one('naive')
get_shuffle_py1br = _one('py1br')
get_shuffle_py1e = _one('py1e')
get_shuffle_py1s = _one('py1s')
get_shuffle_py2s = _one('py2s')

#: The reference's name table (``algos['py1e'](...)``).
algos = {'naive': get_shuffle_naive, 'py1br': get_shuffle_py1br, 'py1e': get_shuffle_py1e,
         'py1s': get_shuffle_py1s, 'py2s': get_shuffle_py2s}
