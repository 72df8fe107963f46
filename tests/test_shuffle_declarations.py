"""Shuffles declare their properties; the planner reads the declarations, never a shuffle's name (issue 14).

* ``splits_canonical_nodes`` (``py1s``, ``py2s``) makes the default ``num_canonical_nodes`` 64 per physical node.
* ``spreads_shards_within_block`` (``py1e``, ``py1n``) makes the planner warn when a shard is larger than the
  shuffle block, for every plan: computed, or served from the node's plan cache (issue 19 item 4).

A third-party shuffle registered at runtime is treated exactly like the first-party ones.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

from streaming_core import StreamingDataset, World
from streaming_core.common.paths import coordination_dir
from streaming_core.ordering.planner import BLOCK_WARNING, EpochPlanner, default_num_canonical_nodes, shuffle_declares
from streaming_core.plugin_api import RegistryView, get_registry, hookimpl
from streaming_core.testing import registered_plugin
from tests.fixtures.data import ids_of


def reverse_units(shard_sizes: Any, num_canonical_nodes: int, seed: int, epoch: int, block_size: int) -> Any:
    """A third-party shuffle: the samples in reverse order (a plain function with declared properties)."""
    return np.arange(int(np.sum(shard_sizes)), dtype=np.int64)[::-1].copy()


reverse_units.splits_canonical_nodes = True  # type: ignore[attr-defined]
reverse_units.spreads_shards_within_block = True  # type: ignore[attr-defined]


class ReversePlugin:
    """Registers ``reverse-split`` (declares both properties) and ``reverse-plain`` (declares none)."""

    @hookimpl
    def register_shuffle_algorithms(self, registry: RegistryView) -> None:
        registry.add('reverse-split', reverse_units)
        registry.add('reverse-plain', lambda *args: reverse_units(*args))


def test_first_party_shuffles_declare_their_properties():
    shuffles = get_registry('shuffle')
    assert [name for name in ('py1e', 'py1s', 'py2s', 'py1b', 'py1br', 'py1n', 'naive')
            if shuffle_declares(shuffles.get(name), 'splits_canonical_nodes')] == ['py1s', 'py2s']
    assert [name for name in ('py1e', 'py1s', 'py2s', 'py1b', 'py1br', 'py1n', 'naive')
            if shuffle_declares(name, 'spreads_shards_within_block')] == ['py1e', 'py1n']
    assert default_num_canonical_nodes('py1s', 2) == 128 and default_num_canonical_nodes('py1e', 2) == 2


def test_a_shuffle_registered_at_runtime_is_treated_the_same(mds_dir):
    path = mds_dir(128, size_limit=1 << 11)
    with registered_plugin(ReversePlugin(), name='reverse-shuffles'):
        assert default_num_canonical_nodes('reverse-split', 3) == 192
        assert default_num_canonical_nodes('reverse-plain', 3) == 3
        dataset = StreamingDataset(local=path, batch_size=4, shuffle=True, shuffle_algo='reverse-split')
        assert sorted(ids_of(dataset)) == list(range(128))
        assert dataset.num_canonical_nodes == 64  # as py1s would get: the declaration, not the name
        plain = StreamingDataset(local=path, batch_size=4, shuffle=True, shuffle_algo='reverse-plain')
        assert ids_of(plain) == list(range(127, -1, -1))  # one canonical node: the shuffle's order as it is
        assert plain.num_canonical_nodes == 1
    with pytest.raises(Exception, match='reverse-split'):
        default_num_canonical_nodes('reverse-split', 1)  # gone with its plugin


def _planner(algo: str, sizes: list[int], block: int, shuffle: bool = True) -> EpochPlanner:
    total = sum(sizes)
    return EpochPlanner(samples_per_shard=np.array(sizes), shards_per_stream=np.array([len(sizes)]),
                        choose_per_stream=np.array([total]), proportion_per_stream=np.array([1.0]), epoch_size=total,
                        batch_size=2, num_canonical_nodes=1, shuffle=shuffle, shuffle_algo=algo,
                        shuffle_block_size=block)


def test_the_block_warning_follows_the_declaration():
    with registered_plugin(ReversePlugin(), name='reverse-shuffles'):
        assert _planner('reverse-split', [30, 10], 20).order_warnings() == [BLOCK_WARNING]
        assert _planner('reverse-split', [20, 10], 20).order_warnings() == []  # no shard above the block
        assert _planner('reverse-plain', [30, 10], 20).order_warnings() == []  # declares nothing
        assert _planner('reverse-split', [30, 10], 20, shuffle=False).order_warnings() == []  # no shuffle
        with pytest.warns(UserWarning, match='Shuffle block size was smaller than shard size'):
            _planner('reverse-split', [30, 10], 20).plan(World(), 0, 0)


def _plan_files() -> list[str]:
    return sorted(name for name in os.listdir(coordination_dir('plans')) if name.endswith('.npy'))


def test_a_plan_from_the_plan_cache_warns_too(mds_dir, monkeypatch):
    path = mds_dir(60, size_limit=1 << 10)  # about 20 samples per shard
    config = dict(local=path, batch_size=4, shuffle=True, shuffle_algo='py1e', shuffle_block_size=4)
    with pytest.warns(UserWarning, match='Shuffle block size was smaller than shard size'):
        first = ids_of(StreamingDataset(**config))
    cached = _plan_files()
    assert cached, 'the first iteration wrote no plan to the plan cache'

    def not_again(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError('the second iteration recomputed the plan instead of reading the plan cache')

    monkeypatch.setattr(EpochPlanner, 'plan_node', not_again)
    with pytest.warns(UserWarning, match='Shuffle block size was smaller than shard size'):
        second = ids_of(StreamingDataset(**config))
    assert second == first and _plan_files() == cached
    monkeypatch.undo()
    with warnings.catch_warnings():  # a block above every shard: no warning, computed or cached
        warnings.simplefilter('error')
        for _ in range(2):
            assert sorted(ids_of(StreamingDataset(**{**config, 'shuffle_block_size': 1000}))) == list(range(60))
