"""``streaming simulate``: what a training run's data loading will do, from the real planning code, without data."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from typing import Any

from streaming_core.tools.commands._common import add_storage_option, comma_list, storage_options

__all__ = ['add_parser', 'run', 'command_start']

_EPILOG = textwrap.dedent('''\
    Examples:
      streaming simulate --samples 10m --shard-samples 2000 --sample-bytes 30kb --nodes 4 --shuffle-algo py1e,naive
      streaming simulate --index s3://bucket/train --nodes 8 --ranks-per-node 8 --cache-limit 200gb --out plots/

    The numbers printed: startup time and time to first batch, total time, steps slowed by downloads, downloads and
    bytes per node, peak cache, the smallest cache that avoids re-downloads, and the shuffle quality per algorithm
    (between 0 and 1: 1 = the batches' shard mix is as random as a perfect shuffle's, 0 = every device batch from
    one shard, or a mix fixed by the plan). Configurations that are not a shuffle (none, more canonical nodes than
    shards) are flagged and never named best. The last line is the command's wall time. With --out, PNG plots of
    downloads, cache occupancy, time and quality are written there. See docs/guide/simulator.md.''')


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'simulate', help='simulate downloads, cache use, step time and shuffle quality of a training run',
        description='Simulate the data loading of a training run with the library\'s own sample order: per-node '
                    'shard downloads, cache occupancy under cache_limit, time lost waiting for downloads, and the '
                    'shuffle quality of each shuffle algorithm. No shard is downloaded (with --index, only the '
                    'index). Use it to choose shuffle_algo, shuffle_block_size, num_canonical_nodes and '
                    'cache_limit before a run.',
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group('dataset (synthetic, or --index)')
    data.add_argument('--samples', default=None, metavar='N', help='number of samples (10m, 500k, ...)')
    data.add_argument('--shard-samples', default=None, metavar='S', help='samples per shard')
    data.add_argument('--sample-bytes', default=None, metavar='B', help='bytes per sample (30kb, 1mb, ...)')
    data.add_argument('--index', default=None, metavar='PATH|URL',
                      help='take the shard sizes from a real dataset: a directory, its index.json, or a URL')
    data.add_argument('--split', default=None, help='a split subdirectory of --index')
    train = parser.add_argument_group('training')
    train.add_argument('--nodes', type=int, default=1, help='physical nodes (default 1)')
    train.add_argument('--ranks-per-node', type=int, default=8, help='ranks (devices) per node (default 8)')
    train.add_argument('--workers', type=int, default=8, help='DataLoader workers per rank (default 8)')
    train.add_argument('--batch-size', type=int, default=32, help='per-device batch size (default 32)')
    train.add_argument('--epochs', type=int, default=1, help='epochs to simulate (default 1)')
    order = parser.add_argument_group('sample order')
    order.add_argument('--shuffle-algo', default='py1e', metavar='ALGO[,ALGO...]',
                       help='shuffle algorithms to compare, e.g. py1e,py1br,naive; "none" for no shuffle '
                            '(default py1e)')
    order.add_argument('--shuffle-block-size', type=int, default=None, metavar='N',
                       help='shuffle block size (default: the library\'s, max(4M / NCN, 2^18))')
    order.add_argument('--num-canonical-nodes', type=int, default=None, metavar='NCN',
                       help='canonical nodes (default: the library\'s: nodes, or 64 x nodes for py1s/py2s)')
    order.add_argument('--seed', type=int, default=9176, help='shuffle seed (default 9176)')
    order.add_argument('--partition-algo', choices=('relaxed', 'orig'), default='relaxed',
                       help='partitioning (default relaxed)')
    system = parser.add_argument_group('cache and network model')
    system.add_argument('--cache-limit', default=None, metavar='BYTES',
                        help='cache limit per node (200gb, ...; default none)')
    system.add_argument('--bandwidth', default='500mb', metavar='BYTES',
                        help='download bandwidth per node, bytes per second (default 500mb)')
    system.add_argument('--time-per-sample', type=float, default=0.001, metavar='SECONDS',
                        help='compute time per sample on a device (default 0.001)')
    system.add_argument('--predownload', type=int, default=None, metavar='N',
                        help='samples each worker prepares ahead (default 8 x batch size)')
    output = parser.add_argument_group('output')
    output.add_argument('--out', default=None, metavar='DIR', help='write PNG plots into DIR')
    output.add_argument('--json', action='store_true', help='print the numbers as JSON')
    add_storage_option(output)  # type: ignore[arg-type]
    parser.set_defaults(run=run)


def _dataset(args: argparse.Namespace) -> Any:
    from streaming_core.common.arguments import bytes_to_int, number_abbrev_to_int
    from streaming_core.tools.simulation import DatasetShape
    synthetic = [args.samples, args.shard_samples, args.sample_bytes]
    if args.index:
        if any(value is not None for value in synthetic):
            raise ValueError('Give either --index or --samples/--shard-samples/--sample-bytes, not both.')
        return DatasetShape.from_location(args.index, args.split, storage_options(args))
    if any(value is None for value in synthetic):
        raise ValueError('Describe the dataset: --samples N --shard-samples S --sample-bytes B, or --index '
                         'PATH|URL of a real dataset.')
    return DatasetShape.synthetic(number_abbrev_to_int(args.samples), number_abbrev_to_int(args.shard_samples),
                                  bytes_to_int(args.sample_bytes))


def _process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or None where that cannot be read."""
    try:
        with open('/proc/self/stat', 'rb') as handle:
            fields = handle.read().rsplit(b')', 1)[1].split()
        started = int(fields[19]) / os.sysconf('SC_CLK_TCK')  # field 22, after pid and (comm)
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def command_start() -> float:
    """The ``time.monotonic()`` at which the command started: the process's start when this process is the
    ``streaming`` command itself (so start-up and imports count), else now (``main()`` called from Python)."""
    now = time.monotonic()
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ''
    if program in ('streaming', 'streaming.exe') or sys.argv[0].endswith(os.path.join('streaming_core', 'cli.py')):
        age = _process_age()
        if age is not None:
            return now - age
    return now


def run(args: argparse.Namespace) -> int:
    """Simulate, print the report (or JSON), write the plots.

    The time printed last (``wall_seconds`` in JSON) is the command's wall-clock time: from the process's start
    when run as ``streaming simulate`` (see :func:`command_start`) to the end of the plots.
    """
    started = command_start()
    from streaming_core.tools.simulation import TrainingShape, format_report, simulate
    from streaming_core.tools.simulation.report import timing_line
    dataset = _dataset(args)
    training = TrainingShape(
        nodes=args.nodes, ranks_per_node=args.ranks_per_node, workers=args.workers, batch_size=args.batch_size,
        shuffle_algos=comma_list(args.shuffle_algo), shuffle_block_size=args.shuffle_block_size,
        num_canonical_nodes=args.num_canonical_nodes, shuffle_seed=args.seed, partition_algo=args.partition_algo,
        epochs=args.epochs, cache_limit=args.cache_limit, bandwidth=args.bandwidth,
        time_per_sample=args.time_per_sample, predownload=args.predownload)
    result = simulate(dataset, training)
    plots: list[str] = []
    plot_seconds = 0.0
    if args.out:
        from streaming_core.tools.simulation import write_plots
        plotting = time.monotonic()
        plots = write_plots(result, args.out)
        plot_seconds = time.monotonic() - plotting
    wall = time.monotonic() - started
    if args.json:
        summary = result.summary()
        summary.update(plots=plots, plot_seconds=plot_seconds, wall_seconds=wall)
        print(json.dumps(summary, indent=2))
    else:
        print(format_report(result, timing=False))
        if plots:
            print(f'Plots: {", ".join(plots)}')
        print(timing_line(result, wall, plot_seconds))
    return 0
