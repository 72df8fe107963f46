"""Hook implementations of streaming-csv: shard formats csv, tsv, xsv."""

from __future__ import annotations

from streaming_core.plugin_api import RegistryView, hookimpl
from streaming_csv.reader import XSVFormat


@hookimpl
def register_shard_formats(registry: RegistryView) -> None:
    """Register ``csv``, ``tsv`` and ``xsv``."""
    for name in ('csv', 'tsv', 'xsv'):
        registry.add(name, XSVFormat(name))
