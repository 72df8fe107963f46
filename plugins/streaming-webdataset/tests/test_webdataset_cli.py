"""``streaming index`` writes the sidecar index that later readers use instead of walking the tars; ``streaming
convert webdataset`` writes MDS with the same samples; ``streaming inspect`` describes a directory of tars."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from wds_data import read_with_tarfile, write_tar, write_tars

from streaming_core import StreamingDataset
from streaming_core.cli import main
from streaming_core.errors import IndexFormatError
from streaming_core.reading.derived_index import list_source


def _counting_read(data: str, seen: list[str]) -> Any:
    def read(name: str, start: int, length: int) -> bytes:
        seen.append(name)
        with open(os.path.join(data, name), 'rb') as handle:
            handle.seek(start)
            return handle.read(length)
    return read


def test_streaming_index_writes_a_sidecar_that_replaces_the_header_walk(tmp_path: Any, capsys: Any) -> None:
    from streaming_webdataset.builder import SIDECAR, WebDatasetIndexBuilder
    data = str(tmp_path / 'data')
    write_tars(data, tars=3, per_tar=12)
    walked = WebDatasetIndexBuilder().build(list_source(data), _counting_read(data, []), where=data)
    assert main(['index', data]) == 0
    assert 'webdataset-index.json' in capsys.readouterr().out
    sidecar = json.loads(open(os.path.join(data, SIDECAR)).read())
    assert sidecar['__kind__'] == 'wids-shard-index-v1'
    assert [(r['url'], r['nsamples'], r['filesize']) for r in sidecar['shardlist']] == [
        (f'shard-0000{i}.tar', 12, os.path.getsize(os.path.join(data, f'shard-0000{i}.tar'))) for i in range(3)]
    seen: list[str] = []
    from_sidecar = WebDatasetIndexBuilder().build(list_source(data), _counting_read(data, seen), where=data)
    assert seen == [SIDECAR]  # no tar was read
    assert from_sidecar == walked
    dataset = StreamingDataset(local=data, batch_size=2, shuffle=True)
    assert sorted(dataset, key=lambda s: s['json']['id']) == read_with_tarfile(data)


def test_a_stale_or_partial_sidecar_row_is_walked(tmp_path: Any) -> None:
    from streaming_webdataset.builder import SIDECAR, WebDatasetIndexBuilder
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=10)
    assert main(['index', data]) == 0
    write_tars(data, tars=1, per_tar=4, start=10, prefix='shard')  # shard-00002.tar... replaced below
    os.replace(os.path.join(data, 'shard-00002.tar'), os.path.join(data, 'shard-00001.tar'))  # other size
    write_tars(data, tars=1, per_tar=5, start=40, prefix='more')  # not in the sidecar
    seen: list[str] = []
    index = WebDatasetIndexBuilder().build(list_source(data), _counting_read(data, seen), where=data)
    assert [(e['raw_data']['basename'], e['samples']) for e in index['shards']] == [
        ('more-00008.tar', 5), ('shard-00000.tar', 10), ('shard-00001.tar', 4)]
    assert SIDECAR in seen and 'shard-00000.tar' not in seen and 'shard-00001.tar' in seen


def test_a_wids_index_with_counts_only_is_accepted(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=7)
    wids = {'__kind__': 'wids-shard-index-v1', 'wids_version': 1, 'name': 'x',
            'shardlist': [{'url': 'shard-00000.tar', 'nsamples': 7}, {'url': 'shard-00001.tar', 'nsamples': 7}]}
    with open(os.path.join(data, 'webdataset-index.json'), 'w') as handle:
        json.dump(wids, handle)
    dataset = StreamingDataset(local=data, batch_size=1)
    assert list(dataset) == read_with_tarfile(data)


def test_a_malformed_sidecar_is_refused_by_name(tmp_path: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=1, per_tar=3)
    with open(os.path.join(data, 'webdataset-index.json'), 'w') as handle:
        json.dump({'shardlist': [{'url': 'shard-00000.tar'}]}, handle)
    with pytest.raises(IndexFormatError, match=r'webdataset-index\.json: shardlist row 0 needs a "url" and a '
                                               r'non-negative "nsamples"'):
        StreamingDataset(local=data, batch_size=1)


def test_streaming_index_refuses_a_directory_without_tars(tmp_path: Any, capsys: Any) -> None:
    data = tmp_path / 'data'
    data.mkdir()
    (data / 'notes.txt').write_text('x')
    assert main(['index', str(data), '--format', 'webdataset']) == 1
    assert 'no index.json and no *.tar or *.tar.gz or *.tgz file' in capsys.readouterr().err


def test_convert_webdataset_to_mds_keeps_every_sample(tmp_path: Any, capsys: Any) -> None:
    data, out = str(tmp_path / 'data'), str(tmp_path / 'mds')
    write_tars(data, tars=2, per_tar=15)
    assert main(['convert', 'webdataset', data, out, '--quiet']) == 0
    converted = list(StreamingDataset(local=out, batch_size=1))
    expected = read_with_tarfile(data)
    assert len(converted) == 30
    for got, want in zip(converted, expected):
        assert got == {name: value for name, value in want.items() if name != '__url__'}
    index = json.loads(open(os.path.join(out, 'index.json')).read())
    assert index['shards'][0]['column_names'] == ['__key__', 'cls', 'jpg', 'json', 'txt']


def test_inspect_describes_a_directory_of_tars(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    write_tar(os.path.join(data, 'a.tar'), [('k.jpg', b'x'), ('k.cls', b'3')])
    assert main(['inspect', data, '--json']) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary['formats'] == {'webdataset': 1} and summary['samples'] == 1
    assert summary['columns'] == {'jpg': 'bytes', 'cls': 'int'}


def test_verify_checks_a_directory_of_tars(tmp_path: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    write_tars(data, tars=2, per_tar=5)
    assert main(['verify', data]) == 0
    assert 'OK: every shard matches the index.' in capsys.readouterr().out
