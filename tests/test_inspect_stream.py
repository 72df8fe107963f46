"""``streaming inspect`` streams our ``index.json``: the same summary as the whole-file parse, in bounded memory
(no object per shard), and broken or foreign indexes still reported by the general path (issue 15)."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest

from streaming_core.cli import main
from streaming_core.commands.inspect import summarize, summarize_file
from streaming_core.index import load_index
from tests.fixtures.data import write_mds


def _many_shards(path: str, num_shards: int) -> str:
    """An index of ``num_shards`` entries (copies of a real one, renamed; index-only)."""
    write_mds(path, 64, size_limit=600, compression='zstd', hashes=['xxh64'])
    real = load_index(os.path.join(path, 'index.json'))['shards']
    shards = []
    for i in range(num_shards):
        entry = json.loads(json.dumps(real[i % len(real)]))
        entry['raw_data']['basename'] = f'shard.{i:07}.mds'
        shards.append(entry)
    with open(os.path.join(path, 'index.json'), 'w') as handle:
        json.dump({'shards': shards, 'version': 2}, handle)
    return os.path.join(path, 'index.json')


def test_streamed_summary_equals_the_parsed_one(tmp_path):
    index = _many_shards(str(tmp_path / 'ds'), 500)
    expected = summarize(load_index(index), index, os.path.getsize(index))
    assert summarize_file(index, index) == expected
    without = summarize_file(index, index, keep_rows=False)
    assert without.pop('shard_list') == [] and expected.pop('shard_list')
    assert without == expected
    assert expected['shards'] == 500 and expected['zip_bytes'] and expected['hashes'] == ['xxh64']


def test_the_cli_output_is_the_streamed_summary(tmp_path, capsys):
    index = _many_shards(str(tmp_path / 'ds'), 50)
    assert main(['inspect', str(tmp_path / 'ds'), '--json', '--shards']) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == summarize(load_index(index), index, os.path.getsize(index))


def test_a_big_index_is_summarised_without_an_object_per_shard(tmp_path):
    index = _many_shards(str(tmp_path / 'ds'), 40_000)
    size = os.path.getsize(index)
    assert size > 10 * 2 ** 20
    tracemalloc.start()
    try:
        summary = summarize_file(index, index, keep_rows=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary['shards'] == 40_000
    assert peak < 8 * 2 ** 20, f'peak {peak} bytes for a {size}-byte index'  # a json.loads of it: ~10x its size


@pytest.mark.parametrize('text', [b'{"shards": [1, 2], "version": 2}', b'{"shards": [',
                                  b'{"version": 3, "shards": []}'])
def test_a_broken_index_is_still_reported_as_before(tmp_path, capsys, text):
    (tmp_path / 'ds').mkdir()
    (tmp_path / 'ds' / 'index.json').write_bytes(text)
    assert main(['inspect', str(tmp_path / 'ds')]) == 1
    err = capsys.readouterr().err
    assert err.startswith('streaming inspect: error:') and 'index.json' in err
