"""Hook implementations of streaming-csv: shard formats csv, tsv, xsv."""

from __future__ import annotations
