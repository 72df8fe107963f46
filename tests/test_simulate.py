"""The simulator: real planning, consistent download and cache numbers, timing, shuffle quality, plots, CLI."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from streaming_core.cli import main
from streaming_core.errors import CacheLimitError
from streaming_core.simulation import DatasetShape, TrainingShape, simulate
from streaming_core.simulation.access import AccessStream, epoch_plans, make_planner, make_world, step_samples
from streaming_core.simulation.cache import _lru, min_cache_bytes, node_downloads
from streaming_core.simulation.quality import same_shard_pairs
from tests.fixtures.data import write_mds

DATASET = DatasetShape.synthetic(60_000, 500, 100)


def _training(**kwargs):
    base = {'nodes': 2, 'ranks_per_node': 2, 'workers': 2, 'batch_size': 8, 'shuffle_algos': ['py1e'],
            'shuffle_block_size': 5_000, 'epochs': 2, 'bandwidth': '50mb', 'time_per_sample': 0.0001}
    base.update(kwargs)
    return TrainingShape(**base)


def test_every_shard_read_is_downloaded_once_per_node_without_a_limit():
    result = simulate(DATASET, _training(shuffle_algos=['py1e', 'naive', 'none']))
    for algo in result.algos:
        per_device = 60_000 // (2 * 2)
        assert algo.steps == 2 * 2 * -(-per_device // (8 * 2))  # epochs x workers x padded batches per worker
        for node in algo.nodes:
            counts = node.download_counts(DATASET.num_shards)
            accessed = node.shards_accessed()
            assert set(np.flatnonzero(counts)) == set(accessed.tolist())
            assert counts[accessed].tolist() == [1] * len(accessed)  # once per node, epochs included
            assert node.download_bytes == int(DATASET.download_bytes[accessed].sum()) == node.touched_bytes
        # Every sample a node reads is in a shard that node downloaded.
        world = make_world(result.training)
        plans = epoch_plans(make_planner(DATASET, result.training, algo.algo), world, 1)
        for node, plan in zip(algo.nodes, plans):
            ids = plan[plan >= 0]
            shards = np.searchsorted(DATASET.shard_ends, ids, side='right')
            assert set(shards.tolist()) <= set(node.fetched.shards.tolist())
        union = set().union(*(set(n.shards_accessed().tolist()) for n in algo.nodes))
        assert union == set(range(DATASET.num_shards))


def test_a_smaller_cache_downloads_more_and_stays_under_the_limit():
    free = simulate(DATASET, _training(shuffle_algos=['py1e', 'naive']))
    limit = 20 * 500 * 100
    tight = simulate(DATASET, _training(shuffle_algos=['py1e', 'naive'], cache_limit=limit))
    for algo in ('py1e', 'naive'):
        before, after = free.by_algo(algo), tight.by_algo(algo)
        assert after.total_downloads > before.total_downloads
        for node in after.nodes:
            assert node.fetched.occupancy.max() <= limit
            assert node.peak_cache_bytes <= limit
            assert set(node.shards_accessed().tolist()) <= set(node.fetched.shards.tolist())
    # naive touches every shard from every node, py1e keeps each node to its region: fewer downloads.
    assert tight.by_algo('naive').total_downloads > tight.by_algo('py1e').total_downloads
    big = simulate(DATASET, _training(cache_limit=DATASET.raw_bytes.sum() * 2))
    assert big.algos[0].total_downloads == free.by_algo('py1e').total_downloads


def test_cache_limit_checked_like_the_library():
    with pytest.raises(CacheLimitError, match='at least'):
        simulate(DATASET, _training(cache_limit=1000))
    result = simulate(DATASET, _training(cache_limit=60_000))
    assert result.warnings and 'four times' in result.warnings[0]


def test_lru_matches_a_plain_list_model():
    rng = np.random.default_rng(7)
    raw = rng.integers(1, 10, 30)
    for budget in (12, 25, 60):
        shards = rng.integers(0, 30, 400)
        stream = AccessStream(np.arange(400), shards, [0, 400])
        got = _lru(stream, raw, budget)
        cache, used, misses = [], 0, []
        for i, shard in enumerate(shards.tolist()):
            if shard in cache:
                cache.remove(shard)
                cache.append(shard)
                continue
            used += raw[shard]
            while used > budget:
                used -= raw[cache.pop(0)]
            cache.append(shard)
            misses.append(i)
        assert got.steps.tolist() == misses
    stream = AccessStream(np.array([0, 0, 1, 2, 2, 3]), np.array([1, 2, 1, 3, 2, 1]), [0, 2, 4])
    assert node_downloads(stream, np.ones(4, np.int64), None).shards.tolist() == [1, 2, 3]
    # Epoch 0 holds {1, 2} together; epoch 1 holds {3, 2} at step 2 and {1} at step 3.
    assert min_cache_bytes(stream, np.array([0, 10, 20, 40])) == 60


def test_shuffle_quality_orders_the_algorithms():
    result = simulate(DATASET, _training(shuffle_algos=['naive', 'py1e', 'none'], epochs=1))
    quality = {a.algo: a.quality.quality for a in result.algos}
    assert quality['naive'] > quality['py1e'] > quality['none'] >= 0
    assert quality['naive'] == pytest.approx(1.0, abs=0.02)
    assert quality['py1e'] == pytest.approx(1 - 500 / 5_000, abs=0.05)  # about 1 - shard / block
    assert quality['none'] < 0.1
    assert same_shard_pairs(np.array([[1, 2, 1, 1, 2], [-1, -1, 3, 3, 4]])) == (5, 13)
    # py1s reads one shard at a time per canonical node: a batch mixes only as many shards as canonical nodes feed
    # a device (its default of 64 canonical nodes per node mixes well; one per node does not).
    one = simulate(DATASET, _training(shuffle_algos=['py1s'], num_canonical_nodes=2, epochs=1))
    assert one.algos[0].quality.quality < 0.2


def test_time_model():
    fast = simulate(DATASET, _training(bandwidth=1e18, epochs=1))
    algo = fast.algos[0]
    compute = algo.steps * 8 * 0.0001
    assert algo.timeline.total_seconds == pytest.approx(compute)
    assert algo.timeline.stalled_steps == 0 and algo.timeline.startup_seconds == pytest.approx(0, abs=1e-9)
    slow = simulate(DATASET, _training(bandwidth=20_000, epochs=1, predownload=0))
    t = slow.algos[0].timeline
    assert t.stalled_steps > 0 and t.total_seconds > compute + t.stall_seconds * 0.99
    assert t.startup_seconds > 0 and t.first_batch_seconds == pytest.approx(t.startup_seconds + 8 * 0.0001)
    # Every node is busy for exactly its downloaded bytes over the bandwidth.
    for node in slow.algos[0].nodes:
        assert node.busy_seconds == pytest.approx(node.download_bytes / 20_000)
    ahead = simulate(DATASET, _training(bandwidth=20_000, epochs=1, predownload=64))
    assert ahead.algos[0].timeline.total_seconds < t.total_seconds


def test_plans_are_the_datasets_own(tmp_path):
    """The simulator plans exactly what StreamingDataset plans for the same dataset and world."""
    from streaming_core import StreamingDataset
    path = write_mds(str(tmp_path / 'ds'), 700, size_limit=900)
    dataset_shape = DatasetShape.from_location(path)
    assert dataset_shape.num_samples == 700 and dataset_shape.index_bytes > 0
    training = TrainingShape(nodes=2, ranks_per_node=2, workers=3, batch_size=4, shuffle_algos=['py1e'])
    dataset = StreamingDataset(local=path, batch_size=4, shuffle=True)
    world = make_world(training)
    expected = dataset.get_plan(world, epoch=0)
    planner = make_planner(dataset_shape, training, 'py1e')
    assert planner.num_canonical_nodes == dataset.num_canonical_nodes
    assert planner.shuffle_block_size == dataset.shuffle_block_size
    got = np.stack(epoch_plans(planner, world, 0))
    assert np.array_equal(got, expected)
    # A step is one batch of every rank, from worker step % workers.
    per_step = step_samples(got[0])
    assert per_step[4].tolist() == got[0, :, 1, 1].reshape(-1).tolist()


def test_cli_simulate_index_plots_and_json(tmp_path, capsys):
    path = write_mds(str(tmp_path / 'ds'), 3000, size_limit=2000, compression='zstd')
    plots = tmp_path / 'plots'
    code = main(['simulate', '--index', path, '--nodes', '2', '--ranks-per-node', '2', '--workers', '2',
                 '--batch-size', '4', '--shuffle-algo', 'naive,py1e,none', '--shuffle-block-size', '600',
                 '--out', str(plots), '--json', '--epochs', '2'])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and [a['shuffle_algo'] for a in report['algorithms']] == ['naive', 'py1e', 'none']
    assert report['dataset']['samples'] == 3000 and report['dataset']['download_bytes'] < report['dataset'][
        'raw_bytes']  # compressed shards: downloads are the zstd files
    for name in ('downloads.png', 'cache.png', 'timeline.png', 'quality.png'):
        assert os.path.getsize(plots / name) > 5000
        assert (plots / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert sorted(report['plots']) == sorted(str(plots / n) for n in os.listdir(plots))
    code = main(['simulate', '--samples', '20k', '--shard-samples', '1000', '--sample-bytes', '2kb',
                 '--shuffle-algo', 'py1e,naive', '--cache-limit', '10mb', '--nodes', '1'])
    text = capsys.readouterr().out
    assert code == 0 and 'shuffle quality' in text and 'startup time' in text and 'min cache' in text
    assert 'Best shuffle quality:' in text


def test_cli_simulate_errors(capsys):
    assert main(['simulate', '--samples', '100']) == 1
    assert 'Describe the dataset' in capsys.readouterr().err
    assert main(['simulate', '--samples', '100', '--shard-samples', '10', '--sample-bytes', '10',
                 '--shuffle-algo', 'py9']) == 1
    assert "Unknown shuffle algorithm 'py9'" in capsys.readouterr().err
    assert main(['simulate', '--samples', '100', '--shard-samples', '10', '--sample-bytes', '10',
                 '--cache-limit', '50']) == 1
    assert 'Cache limit (50 bytes) is too low' in capsys.readouterr().err


def test_a_million_samples_run(capsys):
    dataset = DatasetShape.synthetic(1_000_000, 2_000, 20_000)
    result = simulate(dataset, TrainingShape(nodes=4, ranks_per_node=8, workers=4, batch_size=16,
                                             shuffle_algos=['py1e', 'py1br'], cache_limit='8gb'))
    for algo in result.algos:
        assert sum(n.shards_read for n in algo.nodes) >= dataset.num_shards
        assert algo.timeline.total_seconds > 0
