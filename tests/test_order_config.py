"""OrderConfig: the order arguments validated in one place, shared by StreamingDataset and EpochPlanner."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from streaming_core import StreamingDataset
from streaming_core.errors import UnknownMethodError, UnknownNameError
from streaming_core.ordering.order_config import OrderConfig, OrderField, parse_epoch_size
from streaming_core.ordering.planner import EpochPlanner
from tests.fixtures.data import ids_of

#: (arguments, exception type, message part): every invalid order argument, as the dataset and the planner refuse it.
INVALID = [
    ({'sampling_method': 'x'}, ValueError, 'Invalid sampling method: x'),
    ({'sampling_granularity': 0}, ValueError, '`sampling_granularity` must be a positive integer'),
    ({'sampling_granularity': True}, ValueError, '`sampling_granularity` must be a positive integer'),
    ({'partition_algo': 'nope'}, ValueError, "Invalid partition_algo: 'nope'"),
    ({'shuffle_seed': -1}, ValueError, 'Invalid shuffle_seed: -1'),
    ({'shuffle_seed': 1.5}, ValueError, 'Invalid shuffle_seed: 1.5'),
    ({'batch_size': 0}, ValueError, '`batch_size` must be a positive integer'),
    ({'num_canonical_nodes': 0}, ValueError, '`num_canonical_nodes` must be a positive integer, got 0'),
    ({'shuffle_block_size': 0}, ValueError, '`shuffle_block_size` must be a positive integer, got 0'),
]


def _planner(**kwargs):
    args = dict(samples_per_shard=np.array([5, 5]), shards_per_stream=np.array([2]), choose_per_stream=np.array([10]),
                proportion_per_stream=np.array([1.0]), epoch_size=10, batch_size=2, num_canonical_nodes=1)
    args.update(kwargs)
    return EpochPlanner(**args)


@pytest.mark.parametrize('kwargs,error,match', INVALID)
def test_the_dataset_and_the_planner_refuse_the_same_arguments_alike(mds_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        OrderConfig(**kwargs)
    with pytest.raises(error, match=match):
        _planner(**kwargs)
    with pytest.raises(error, match=match):
        StreamingDataset(local=mds_dir(4), **kwargs)


def test_replication_and_registered_names_are_checked(mds_dir):
    with pytest.raises(ValueError, match='Replication factor must be positive. Got 0'):
        OrderConfig(replication=0)
    with pytest.raises(UnknownNameError, match='shuffle algorithm'):
        OrderConfig(shuffle_algo='py9z').check_registered()
    with pytest.raises(UnknownMethodError, match="batching_method='nope'"):
        OrderConfig(batching_method='nope').check_registered()
    assert issubclass(UnknownMethodError, ValueError)
    OrderConfig(shuffle_algo='py9z')  # names are looked up by check_registered only: a planner looks them up late


def test_values_are_normalised_and_the_config_is_frozen():
    config = OrderConfig(shuffle=1, shuffle_seed=np.int64(5), batch_size=np.int64(4), num_canonical_nodes=np.int32(2),
                         replication=np.int64(1))
    assert (config.shuffle, config.shuffle_seed, config.batch_size, config.num_canonical_nodes) == (True, 5, 4, 2)
    assert all(type(v) is int for v in (config.shuffle_seed, config.batch_size, config.num_canonical_nodes,
                                        config.replication))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.shuffle_seed = 7  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(config)) == config


def test_resolved_fills_the_run_dependent_defaults():
    assert OrderConfig().resolved(3) == OrderConfig(num_canonical_nodes=3, shuffle_block_size=1_333_333)
    split = OrderConfig(shuffle_algo='py1s').resolved(2)
    assert (split.num_canonical_nodes, split.shuffle_block_size) == (128, 1 << 18)
    given = OrderConfig(num_canonical_nodes=4, shuffle_block_size=10)
    assert given.resolved(8) is given
    assert OrderConfig(num_canonical_nodes=10).resolved(1).shuffle_block_size == 400_000


def test_parse_epoch_size():
    assert parse_epoch_size(None) is None and parse_epoch_size(0) is None and parse_epoch_size('') is None
    assert parse_epoch_size('2k') == 2000 and parse_epoch_size(7) == 7
    with pytest.raises(ValueError, match='Epoch size cannot be negative. Received -3'):
        parse_epoch_size(-3)


def test_the_planner_needs_resolved_defaults_and_exposes_its_config():
    with pytest.raises(ValueError, match='needs `num_canonical_nodes` resolved'):
        _planner(num_canonical_nodes=None)
    with pytest.raises(ValueError, match='needs `shuffle_block_size` resolved'):
        _planner(shuffle_block_size=None)
    planner = _planner(shuffle=True, shuffle_seed=np.int64(3), batch_size=np.int64(2))
    assert planner.order == OrderConfig(shuffle=True, shuffle_seed=3, batch_size=2, num_canonical_nodes=1,
                                        shuffle_block_size=1 << 18)
    assert type(planner.batch_size) is int and type(planner.shuffle_seed) is int


def test_the_dataset_attributes_are_the_config(mds_dir):
    dataset = StreamingDataset(local=mds_dir(12), batch_size=2, shuffle=True, shuffle_seed=11)
    assert isinstance(StreamingDataset.__dict__['shuffle_seed'], OrderField)
    assert dataset.order_config.shuffle_seed == dataset.shuffle_seed == 11
    dataset.shuffle_seed = 12  # an assignment replaces the config with a validated copy
    assert dataset.order_config.shuffle_seed == 12
    with pytest.raises(ValueError, match='Invalid shuffle_seed'):
        dataset.shuffle_seed = -5
    assert dataset.shuffle_seed == 12
    assert dataset.num_canonical_nodes is None and dataset.shuffle_block_size is None
    order = ids_of(dataset)  # iteration resolves the run-dependent defaults into the config
    assert dataset.order_config.num_canonical_nodes == dataset.num_canonical_nodes == 1
    assert dataset.shuffle_block_size == 4_000_000
    again = StreamingDataset(local=dataset.streams[0].local, batch_size=2, shuffle=True, shuffle_seed=12)
    assert ids_of(again) == order
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.order_config == dataset.order_config
    # Registered names are checked on assignment too, as the constructor checks them, not first at iteration.
    with pytest.raises(UnknownNameError, match="'nope'"):
        dataset.shuffle_algo = 'nope'
    with pytest.raises(UnknownMethodError, match="'rand'"):
        dataset.batching_method = 'rand'
    assert dataset.shuffle_algo == 'py1e' and dataset.batching_method == 'random'
    dataset.shuffle_algo = 'naive'
    assert dataset.order_config.shuffle_algo == 'naive'


def test_an_order_field_must_name_a_config_field():
    with pytest.raises((TypeError, RuntimeError)) as info:  # Python 3.11 wraps __set_name__'s error
        type('Broken', (), {'shufle': OrderField(), 'order_config': OrderConfig()})
    error = info.value.__cause__ or info.value
    assert isinstance(error, TypeError) and "OrderConfig has no field 'shufle'" in str(error)
