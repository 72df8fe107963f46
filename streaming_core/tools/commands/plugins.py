"""``streaming plugins``: the installed plugin distributions and the names each registered."""

from __future__ import annotations

import argparse
import json
from typing import Any

from streaming_core.machinery.discovery import plugin_infos
from streaming_core.machinery.lookup import KINDS

__all__ = ['add_parser', 'run', 'collect', 'converter_names']


def add_parser(subparsers: Any) -> None:
    """Register the subcommand."""
    parser = subparsers.add_parser('plugins', help='list installed plugins and the names they register',
                                   description='List every installed plugin distribution with its version and, per '
                                               'kind (codec, compressor, hash, storage, format, shuffle, batching, and '
                                               'the "streaming convert" converters), the names it registered.')
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
    hooked = {name for record in by_dist.values() for name in record['registered'].get('converter', ())}
    for name, dist, version in converter_names():  # the deprecated entry-point group, listed without importing
        if name in hooked:
            continue
        record = by_dist.setdefault(dist, {'distribution': dist, 'version': version, 'plugins': [],
                                           'registered': {}})
        record['registered'].setdefault('converter', []).append(name)
    return sorted(by_dist.values(), key=lambda r: (r['distribution'] != 'streaming-core', r['distribution']))


def converter_names() -> list[tuple[str, str, str]]:
    """``(name, distribution, version)`` of every converter entry point of the deprecated group (not imported)."""
    from streaming_core.tools.convert.discovery import converter_entry_points
    result = []
    for ep in converter_entry_points():
        dist = getattr(ep, 'dist', None)
        name = (dist.metadata['Name'] if dist is not None else None) or '<unknown>'
        result.append((ep.name, name, (dist.version if dist is not None else '') or ''))
    return result


def run(args: argparse.Namespace) -> int:
    """Print the plugin table (or JSON)."""
    records = collect()
    if args.json:
        print(json.dumps(records, indent=2))
        return 0
    for record in records:
        plugins = f'  (plugins: {", ".join(record["plugins"])})' if record['plugins'] else ''
        print(f'{record["distribution"]} {record["version"]}{plugins}')
        for kind, names in record['registered'].items():
            print(f'    {kind:<11} {", ".join(names)}')
    return 0
