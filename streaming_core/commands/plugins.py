"""``streaming plugins``: the installed plugin distributions and the names each registered."""

from __future__ import annotations

import argparse
import json
from typing import Any

from streaming_core.plugins import plugin_infos
from streaming_core.registry import KINDS

__all__ = ['add_parser', 'run', 'collect']


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser('plugins', help='list installed plugins and the names they register',
                                   description='List every installed plugin distribution with its version and, per '
                                               'kind (codec, compressor, hash, storage, format, shuffle, batching), '
                                               'the names it registered.')
    parser.add_argument('--json', action='store_true', help='print JSON instead of a table')
    parser.set_defaults(run=run)


def collect() -> list[dict[str, Any]]:
    """One record per distribution: name, version, plugins (entry points) and registered names per kind."""
    by_dist: dict[str, dict[str, Any]] = {}
    for info in plugin_infos():
        record = by_dist.setdefault(info.distribution, {'distribution': info.distribution, 'version': info.version,
                                                         'plugins': [], 'registered': {}})
        record['plugins'].append(info.name)
        for kind, names in info.registered.items():
            record['registered'].setdefault(kind, []).extend(names)
    for record in by_dist.values():
        record['registered'] = {kind: sorted(record['registered'][kind]) for kind in KINDS
                                if kind in record['registered']}
    return sorted(by_dist.values(), key=lambda r: (r['distribution'] != 'streaming-core', r['distribution']))


def run(args: argparse.Namespace) -> int:
    """Print the plugin table (or JSON)."""
    records = collect()
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    for record in records:
        print(f'{record["distribution"]} {record["version"]}  (plugins: {", ".join(record["plugins"])})')
        for kind, names in record['registered'].items():
            print(f'    {kind:<11} {", ".join(names)}')
    return 0
