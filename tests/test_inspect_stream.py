"""``streaming inspect`` and ``verify`` stream our ``index.json``: the same summary as the whole-file parse, in
bounded memory (no object per shard), and broken or foreign indexes still reported by the general path (issue 15)."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest

from streaming_core.cli import main
from streaming_core.errors import StreamingError
from streaming_core.reading.index_file import load_index
from streaming_core.tools.commands.inspect import summarize, summarize_file
from streaming_core.tools.commands.verify import StreamedShards, open_streamed, verify_dataset
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


def test_verify_streams_the_index_and_checks_every_shard(tmp_path, capsys):
    local = write_mds(str(tmp_path / 'ds'), 64, size_limit=600, hashes=['xxh64'])
    found = open_streamed(local, None, {}, str(tmp_path / 'scratch'))
    assert isinstance(found.index['shards'], StreamedShards)
    shards = load_index(os.path.join(local, 'index.json'))['shards']
    assert list(found.index['shards']) == shards and len(found.index['shards']) == len(shards)
    results = verify_dataset(found)
    assert [r.ok for r in results] == [True] * len(shards) and sum(r.samples for r in results) == 64
    victim = os.path.join(local, shards[1]['raw_data']['basename'])
    with open(victim, 'r+b') as handle:
        handle.seek(20)
        handle.write(b'\xff')
    assert main(['verify', local, '--quiet']) == 1
    assert 'FAILED: 1 of' in capsys.readouterr().out


def test_verify_refuses_an_index_rewritten_between_passes(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 16, size_limit=600)
    shards = StreamedShards(os.path.join(local, 'index.json'), 'the index')
    assert len(shards) == 2
    write_mds(local, 24, start=100, size_limit=600, exist_ok=True)
    with pytest.raises(StreamingError, match='changed while the dataset was being verified'):
        list(shards)
