"""Builtin ``naive`` shuffle: one global permutation per epoch (every node touches every shard)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streaming_core.plugin_api import RegistryView, hookimpl


def naive_shuffle(shard_sizes: NDArray[np.int64], num_canonical_nodes: int, seed: int, epoch: int,
                  block_size: int) -> NDArray[np.int64]:
    """``default_rng(seed + epoch).permutation(N)``, bit-exact with the reference."""
    total = int(np.sum(shard_sizes))
    return np.random.default_rng(seed + epoch).permutation(total).astype(np.int64)


@hookimpl
def register_shuffle_algorithms(registry: RegistryView) -> None:
    """Register ``naive``."""
    registry.add('naive', naive_shuffle)
