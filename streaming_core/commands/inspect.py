"""``streaming inspect DATASET``: what a dataset holds, from its index alone (nothing else is downloaded)."""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from typing import Any

from streaming_core.commands._common import (
    add_storage_option,
    entry_columns,
    first_line,
    human_bytes,
    open_index,
    storage_options,
)

__all__ = ['add_parser', 'run', 'summarize']


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        'inspect', help='show a dataset\'s formats, columns, shards, samples, sizes, compression and hashes',
        description='Summarise a dataset from its index.json: shard formats, columns and their encodings, shard and '
                    'sample counts, raw and compressed bytes, compression and hashes. Works on a local directory or '
                    'a remote URL (only the index is downloaded).')
    parser.add_argument('dataset', metavar='DATASET', help='a dataset directory, its index.json, or a remote URL')
    parser.add_argument('--split', default=None, help='a split subdirectory of DATASET')
    parser.add_argument('--shards', action='store_true', help='also list every shard')
    parser.add_argument('--json', action='store_true', help='print JSON instead of text')
    add_storage_option(parser)
    parser.set_defaults(run=run)


def _shard_row(number: int, entry: dict[str, Any]) -> dict[str, Any]:
    raw = [entry.get(key) for key in ('raw_data', 'raw_meta') if isinstance(entry.get(key), dict)]
    zipped = [entry.get(key) for key in ('zip_data', 'zip_meta') if isinstance(entry.get(key), dict)]
    return {'shard': number, 'file': (zipped or raw or [{}])[0].get('basename'), 'format': entry.get('format'),
            'samples': int(entry.get('samples') or 0), 'raw_bytes': sum(int(f.get('bytes') or 0) for f in raw),
            'zip_bytes': sum(int(f.get('bytes') or 0) for f in zipped) if zipped else None,
            'compression': entry.get('compression'), 'hashes': list(entry.get('hashes') or [])}


def summarize(index: dict[str, Any], location: str, index_bytes: int) -> dict[str, Any]:
    """The summary ``streaming inspect`` prints, as a dict (also its ``--json`` output)."""
    shards = [_shard_row(i, entry) for i, entry in enumerate(index['shards'])]
    layouts: list[dict[str, str]] = []
    for entry in index['shards']:
        columns = entry_columns(entry)
        if columns not in layouts:
            layouts.append(columns)
    samples = [row['samples'] for row in shards]
    compressed = [row for row in shards if row['zip_bytes'] is not None]
    return {
        'index': location,
        'index_bytes': index_bytes,
        'formats': dict(Counter(row['format'] for row in shards)),
        'columns': layouts[0] if len(layouts) == 1 else layouts,
        'shards': len(shards),
        'samples': sum(samples),
        'samples_per_shard': {'min': min(samples), 'max': max(samples),
                              'mean': sum(samples) / len(samples)} if samples else None,
        'raw_bytes': sum(row['raw_bytes'] for row in shards),
        'zip_bytes': sum(row['zip_bytes'] for row in compressed) if compressed else None,
        'largest_shard_bytes': max((row['zip_bytes'] or 0) + row['raw_bytes'] for row in shards) if shards else 0,
        'compression': dict(Counter(str(row['compression']) for row in shards if row['compression'])),
        'hashes': sorted({h for row in shards for h in row['hashes']}),
        'size_limits': sorted({str(entry.get('size_limit')) for entry in index['shards']}),
        'shard_list': shards,
    }


def _print(summary: dict[str, Any], with_shards: bool) -> None:
    print(f'Dataset index: {summary["index"]} ({human_bytes(summary["index_bytes"])})')
    formats = ', '.join(f'{name} ({count} shards)' for name, count in summary['formats'].items())
    print(f'Format:        {formats or "-"}')
    layouts = summary['columns'] if isinstance(summary['columns'], list) else [summary['columns']]
    for i, columns in enumerate(layouts):
        title = 'Columns:' if len(layouts) == 1 else f'Columns ({i + 1}):'
        print(f'{title:<15}' + first_line([f'{name} ({encoding})' for name, encoding in columns.items()]))
    print(f'Shards:        {summary["shards"]}')
    per = summary['samples_per_shard']
    extra = f' (per shard: min {per["min"]}, mean {per["mean"]:.1f}, max {per["max"]})' if per else ''
    print(f'Samples:       {summary["samples"]}{extra}')
    print(f'Raw bytes:     {human_bytes(summary["raw_bytes"])} ({summary["raw_bytes"]} B)')
    if summary['zip_bytes'] is not None:
        ratio = summary['raw_bytes'] / summary['zip_bytes'] if summary['zip_bytes'] else 0.0
        print(f'Compressed:    {human_bytes(summary["zip_bytes"])} ({summary["zip_bytes"]} B, ratio {ratio:.2f})')
    compression = ', '.join(f'{name} ({count} shards)' for name, count in summary['compression'].items())
    print(f'Compression:   {compression or "none"}')
    print(f'Hashes:        {first_line(summary["hashes"]) if summary["hashes"] else "none"}')
    print(f'Largest shard: {human_bytes(summary["largest_shard_bytes"])} (raw + compressed on disk)')
    if with_shards:
        print()
        print(f'{"shard":>6} {"samples":>8} {"raw":>11} {"compressed":>11}  file')
        for row in summary['shard_list']:
            zipped = human_bytes(row['zip_bytes']) if row['zip_bytes'] is not None else '-'
            print(f'{row["shard"]:>6} {row["samples"]:>8} {human_bytes(row["raw_bytes"]):>11} {zipped:>11}  '
                  f'{row["file"]}')


def run(args: argparse.Namespace) -> int:
    """Print the summary."""
    with tempfile.TemporaryDirectory(prefix='streaming-inspect-') as scratch:
        found = open_index(args.dataset, args.split, storage_options(args), scratch)
    summary = summarize(found.index, found.location, found.index_bytes)
    if args.json:
        if not args.shards:
            summary.pop('shard_list')
        print(json.dumps(summary, indent=2))
    else:
        _print(summary, args.shards)
    return 0
