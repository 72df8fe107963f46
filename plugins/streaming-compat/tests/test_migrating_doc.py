"""The migration guide names every kept difference, the overridable Stream methods and the exception table (its
examples run in tests/test_docs_examples.py, which has docs/migrating.md in RUNNABLE)."""

from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PAGE = os.path.join(ROOT, 'docs', 'migrating.md')


def test_the_guide_names_every_kept_difference() -> None:
    with open(PAGE) as handle:
        text = handle.read()
    for phrase in ('no named shared memory', 'LOCAL_WORLD_SIZE', '`batch_size` is required',
                   'share one local directory', 'alipan://', 'streaming-hf', 'streaming-databricks', 'streaming-sftp',
                   'pip install -e plugins/streaming-compat', 'instead of', 'cache root', '_download_file',
                   '_decompress_shard_part', 'prepare_shard(shard)', 'get_shards(world, allow_unsafe_types)',
                   'json.JSONDecodeError', 'AttributeError', 'Checksum failure'):
        assert phrase in text, phrase
