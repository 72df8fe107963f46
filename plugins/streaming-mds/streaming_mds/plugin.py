"""Hook implementations of streaming-mds: shard format mds, codecs."""

from __future__ import annotations
