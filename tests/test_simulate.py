"""The simulator: real planning, consistent download and cache numbers, timing, shuffle quality, plots, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_core.cli import main
from streaming_core.errors import CacheLimitError
from streaming_core.tools.simulation import DatasetShape, TrainingShape, simulate
from streaming_core.tools.simulation.access import AccessStream, epoch_plans, make_planner, make_world, step_samples
from streaming_core.tools.simulation.cache import _lru, min_cache_bytes, node_downloads
from streaming_core.tools.simulation.quality import (
    MIN_FREEDOM,
    batch_counts,
    quality_from_counts,
    same_shard_pairs,
    shuffle_quality,
)
from streaming_core.tools.simulation.report import best_line
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


# --- shuffle quality: bounded, and never ranks a configuration that is not a shuffle best (issue 12, B10) ---

ALGOS = ['py1e', 'py1br', 'py1s', 'py2s', 'naive', 'none']


def test_quality_of_constructed_orders():
    """A random order scores about 1; one shard per batch and a fixed quota per shard both score about 0."""
    sizes = np.full(16, 256, np.int64)
    shard_ids = np.repeat(np.arange(16), 256)
    batch = 16

    def score(order):
        plan = shard_ids[order].reshape(1, 1, -1, batch)  # one rank, one worker
        return shuffle_quality([plan], sizes)

    rng = np.random.default_rng(3)
    assert score(rng.permutation(4096)).quality > 0.9  # within the estimate's noise
    assert score(np.arange(4096)).quality < 0.01  # in order: every batch from one shard
    rigid = np.arange(4096).reshape(16, 256).T.reshape(-1)  # round robin: one sample of every shard per batch
    measured = score(rigid)
    assert measured.same_shard_rate == 0 and measured.dispersion < 0.01 and measured.quality < 0.01
    # The old score, (1 - same-shard rate) / (1 - random rate), gave this interleave more than a random order.
    assert (1 - measured.same_shard_rate) / (1 - measured.random_rate) > 1.05


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=12), st.integers(1, 12), st.data())
def test_quality_is_bounded_for_any_windows(shard_sizes, width, data):
    sizes = np.array(shard_sizes, np.int64)
    rows = data.draw(st.integers(1, 30))
    ids = data.draw(st.lists(st.integers(-1, len(sizes) - 1), min_size=rows * width, max_size=rows * width))
    windows = np.array(ids, np.int64).reshape(rows, width)
    measured = quality_from_counts(batch_counts(windows, sizes / sizes.sum()), sizes)
    assert 0.0 <= measured.quality <= 1.0
    assert measured.dispersion >= 0.0


@st.composite
def _configs(draw):
    shards = draw(st.integers(2, 12))
    per_shard = draw(st.integers(100, 400))
    nodes = draw(st.integers(1, 2))
    ranks = draw(st.integers(1, 2))
    batch = draw(st.integers(1, 8))
    ncn = nodes * draw(st.integers(1, shards // nodes + 4))  # often more canonical nodes than shards
    training = TrainingShape(nodes=nodes, ranks_per_node=ranks, workers=draw(st.integers(1, 2)), batch_size=batch,
                             shuffle_algos=ALGOS, num_canonical_nodes=ncn, shuffle_seed=draw(st.integers(0, 10_000)),
                             bandwidth=1e12)
    return DatasetShape.synthetic(shards * per_shard, per_shard, 10), training


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_configs())
def test_quality_never_ranks_a_degenerate_configuration_best(config):
    dataset, training = config
    result = simulate(dataset, training)
    quality = {a.algo: a.quality.quality for a in result.algos}
    assert all(0.0 <= q <= 1.0 for q in quality.values())
    flagged = {a.algo for a in result.algos if not a.ranked}
    assert 'none' in flagged and 'naive' not in flagged
    for algo in result.algos:
        if algo.algo not in ('naive', 'none') and algo.num_canonical_nodes > dataset.num_shards:
            assert algo.algo in flagged and 'canonical nodes for' in ' '.join(algo.warnings)
    best = best_line(result)
    named = best.split(':')[1].split(';')[0]
    assert not any(f' {algo} ' in f' {named.replace("=", " ")} ' for algo in flagged), best
    # With enough windows of 8 consecutive batches to measure, the score itself puts every configuration that is not
    # a shuffle of this world (no shuffle, or more canonical nodes than shards) below a perfect shuffle.
    windows = dataset.num_samples // (8 * max(training.batch_size, 2))
    if windows * (dataset.num_shards - 1) >= 2 * MIN_FREEDOM:
        for algo in flagged:
            assert quality[algo] < quality['naive'], (algo, quality)


def test_the_reported_degenerate_case_is_not_ranked_best(capsys):
    """The issue's case: more canonical nodes than shards scored above a perfect shuffle and was named best."""
    code = main(['simulate', '--samples', '4000', '--shard-samples', '500', '--sample-bytes', '1kb', '--nodes', '1',
                 '--ranks-per-node', '1', '--workers', '1', '--batch-size', '32', '--num-canonical-nodes', '16',
                 '--shuffle-algo', 'py1e,py1s,naive,none'])
    text = capsys.readouterr().out
    assert code == 0
    scores = [float(line.split()[2]) for line in text.splitlines() if line.strip().startswith('shuffle quality')]
    assert len(scores) == 4 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores[2] > 0.95 and max(scores[0], scores[1], scores[3]) < 0.1
    assert 'Best shuffle quality: naive;' in text
    assert text.count('16 canonical nodes for 8 shards') == 2 and 'no shuffle (shuffle=False)' in text


def test_workers_without_samples_are_flagged():
    result = simulate(DatasetShape.synthetic(6, 2, 10), TrainingShape(nodes=1, ranks_per_node=4, workers=3,
                                                                      batch_size=4, shuffle_algos=['naive', 'py1e']))
    for algo in result.algos:
        assert not algo.ranked and '8 of 12 DataLoader workers get no samples' in algo.warnings[0]
    assert best_line(result).startswith('Best shuffle quality: none ranked')


# --- cache figures: the within-epoch minimum never exceeds the cache that never re-downloads (issue 12, B10) ---

def _brute_min_cache(stream, raw):
    """Per epoch and step, the bytes of the shards between their first and last read in that epoch; the peak."""
    peak = 0
    for lo, hi in zip(stream.epoch_starts[:-1], stream.epoch_starts[1:]):
        inside = (stream.steps >= lo) & (stream.steps < hi)
        steps, shards = stream.steps[inside], stream.shards[inside]
        spans = {int(s): (int(steps[shards == s].min()), int(steps[shards == s].max())) for s in set(shards.tolist())}
        for step in range(lo, hi):
            peak = max(peak, sum(int(raw[s]) for s, (a, b) in spans.items() if a <= step <= b))
    return peak


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 60), min_size=2, max_size=24), st.integers(1, 500), st.integers(0, 5000),
       st.integers(1, 3), st.integers(1, 2), st.integers(1, 2), st.integers(1, 6), st.integers(1, 3),
       st.sampled_from(ALGOS))
def test_min_cache_never_exceeds_the_cache_that_never_redownloads(samples, sample_bytes, index_bytes, nodes, ranks,
                                                                   workers, batch, epochs, algo):
    samples_per_shard = np.array(samples, np.int64)
    raw = samples_per_shard * sample_bytes
    dataset = DatasetShape(samples_per_shard, raw, raw, index_bytes)
    base = {'nodes': nodes, 'ranks_per_node': ranks, 'workers': workers, 'batch_size': batch, 'epochs': epochs,
            'shuffle_algos': [algo], 'shuffle_block_size': 64, 'num_canonical_nodes': nodes}
    free = simulate(dataset, TrainingShape(**base)).algos[0]
    for node in free.nodes:
        assert node.min_cache_bytes <= node.full_cache_bytes == node.touched_bytes + index_bytes
        assert node.min_cache_bytes == _brute_min_cache(node.accesses, raw) + index_bytes
    # The "never re-downloads" figure is a true cache limit: at it, every node downloads each shard it reads once.
    limit = max(max(n.full_cache_bytes for n in free.nodes), index_bytes + int(raw.max()))
    held = simulate(dataset, TrainingShape(**base, cache_limit=limit)).algos[0]
    for node in held.nodes:
        assert node.downloads == node.shards_read
        assert node.peak_cache_bytes <= limit


def test_report_cache_lines_are_ordered(tmp_path, capsys):
    """With a real index (its bytes count against the cache), the minimum is not above the no-re-download figure."""
    path = write_mds(str(tmp_path / 'ds'), 400, size_limit=2000)
    assert main(['simulate', '--index', path, '--nodes', '1', '--ranks-per-node', '1', '--workers', '1',
                 '--batch-size', '100', '--shuffle-algo', 'naive']) == 0
    lines = capsys.readouterr().out.splitlines()
    minimum = [line for line in lines if line.strip().startswith('min cache')]
    never = [line for line in lines if line.strip().startswith('cache that never')]
    assert len(minimum) == len(never) == 1
    assert _report_bytes(minimum[0]) <= _report_bytes(never[0])


def _report_bytes(line):
    number, unit = line.split('(worst node')[0].split()[-2:]
    return float(number) * {'B': 1, 'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}[unit]


# --- the time printed is the command's wall time (issue 12, B10) ---

def test_cli_prints_its_wall_time(tmp_path):
    """Through the console script, in a fresh process: a run whose plots take seconds prints that time, not 0.0 s."""
    script = os.path.join(os.path.dirname(sys.executable), 'streaming')
    argv = [script, 'simulate', '--samples', '200k', '--shard-samples', '1000', '--sample-bytes', '1kb', '--nodes',
            '2', '--ranks-per-node', '2', '--workers', '2', '--shuffle-algo', 'py1e,naive,none', '--epochs', '2',
            '--out', str(tmp_path / 'plots')]
    began = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True)
    wall = time.monotonic() - began
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith('(took '), last
    took = float(last.split()[1])
    simulated = float(last.split('simulation ')[1].split()[0])
    plotted = float(last.split('plots ')[1].split()[0])
    assert wall > 1.0  # a run that takes measurable time
    assert took <= wall + 0.05 and took >= 0.6 * wall, (took, wall)
    assert took >= simulated + plotted and plotted > 0.1
    # --json carries the same wall time.
    done = subprocess.run([*argv, '--json'], capture_output=True, text=True, timeout=300, check=True)
    summary = json.loads(done.stdout)
    assert summary['wall_seconds'] >= summary['simulation_seconds'] + summary['plot_seconds'] > 0.1


def test_the_documented_defaults_of_the_system_model():
    """simulator.md's inputs table: --bandwidth 500mb, --time-per-sample 0.001, --predownload 8 x the batch."""
    from streaming_core.cli import build_parser
    args = build_parser().parse_args(['simulate', '--samples', '1000'])
    assert (args.bandwidth, args.time_per_sample, args.predownload) == ('500mb', 0.001, None)
