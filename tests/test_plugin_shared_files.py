"""What the plugin-author documentation says about formats whose units share a file (``units_share_files``) and
about an index builder's ``index_version``, checked with a third-party format registered in process: a text format
whose units are chunks of two lines of one ``.lines`` file, and its index builder.

A file several units name is downloaded once, counted once under ``cache_limit``, evicted only when none of its
units is in use, counted once by ``streaming inspect`` and downloaded once by ``streaming verify``; units of one file
that do not follow each other are refused. A kept derived index is read while the builder's ``index_version`` is
unchanged, and rebuilt (the downloaded files kept) when it changes."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from streaming_core import StreamingDataset
from streaming_core.cli import main
from streaming_core.errors import IndexFormatError
from streaming_core.hookspecs import hookimpl
from streaming_core.reading.shard_entry import ShardReaderBase
from streaming_core.testing import registered_plugin
from tests.fixtures.downloads import count_downloads

CHUNK = 2


class ChunkReader(ShardReaderBase):
    """One unit: ``samples`` lines of a ``.lines`` file from line ``first_line``."""

    format_name = 'linechunks'
    entry_keys = frozenset({'compression', 'format', 'hashes', 'raw_data', 'samples', 'size_limit', 'version',
                            'zip_data', 'first_line'})

    def parse(self, entry: Mapping[str, Any], where: str) -> None:
        self.first_line = int(entry['first_line'])

    def open(self, paths: Sequence[str]) -> Any:
        with open(paths[0], encoding='utf-8') as handle:
            lines = handle.read().splitlines()[self.first_line:self.first_line + self.samples]
        return _View(lines)


class _View:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> dict[str, str]:
        return {'text': self.lines[index]}

    def close(self) -> None:
        pass


class ChunkFormat:
    name = 'linechunks'
    writer = None
    units_share_files = True

    def reader(self, entry: Mapping[str, Any], *, allow_unsafe_types: bool = False, where: str = '') -> ChunkReader:
        return ChunkReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)


class ChunkIndexBuilder:
    """One unit per chunk of lines of each file; ``interleave`` lists the units out of file order (refused)."""

    name = 'linechunks'
    patterns = ('*.lines',)

    def __init__(self) -> None:
        self.index_version = 1
        self.builds = 0
        self.interleave = False

    def build(self, files: Sequence[Any], read: Any, *, where: str) -> dict[str, Any]:
        self.builds += 1
        shards = []
        for item in files:
            count = read(item.name, 0, item.size).count(b'\n')  # tiny files: read whole
            for first in range(0, count, CHUNK):
                shards.append({'format': 'linechunks', 'version': 2, 'samples': min(CHUNK, count - first),
                               'compression': None, 'hashes': [], 'size_limit': None, 'zip_data': None,
                               'raw_data': {'basename': item.name, 'bytes': item.size, 'hashes': {}},
                               'first_line': first})
        if self.interleave:
            shards = shards[::2] + shards[1::2]
        return {'shards': shards, 'version': 2}


class _Plugin:
    def __init__(self) -> None:
        self.builder = ChunkIndexBuilder()

    @hookimpl
    def register_shard_formats(self, registry: Any) -> None:
        registry.add('linechunks', ChunkFormat())

    @hookimpl
    def register_index_builders(self, registry: Any) -> None:
        registry.add('linechunks', self.builder)


@pytest.fixture
def plugin() -> Any:
    made = _Plugin()
    with registered_plugin(made, 'linechunks-plugin'):
        yield made


def _write(directory: str, files: int = 3, lines: int = 5) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    texts = []
    for f in range(files):
        rows = [f'file {f} line {i}' for i in range(lines)]
        with open(os.path.join(directory, f'part-{f}.lines'), 'w') as handle:
            handle.write(''.join(f'{row}\n' for row in rows))
        texts += rows
    return texts


def _sizes(directory: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(directory, name)) for name in sorted(os.listdir(directory))
            if name.endswith('.lines')}


def test_a_file_of_several_units_is_downloaded_counted_and_evicted_once(tmp_path: Any, plugin: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    texts = _write(remote)  # 5 lines per file: units of 2, 2 and 1 lines
    fetched = count_downloads(monkeypatch)
    dataset = StreamingDataset(remote=remote, local=local, batch_size=1, shuffle=True, cache_limit=1 << 20)
    assert dataset.num_shards == 9 and dataset.samples_per_shard.tolist() == [2, 2, 1] * 3
    assert sorted(sample['text'] for sample in dataset) == sorted(texts)
    assert sorted(fetched) == list(_sizes(remote))  # each file once, whichever of its units was read first
    assert dataset.cache_usage == sum(_sizes(remote).values())  # each file counted once
    manager = dataset.shard_manager
    manager.hold(1)  # a unit of the first file is in use
    dataset.evict_shard(0)  # another unit of that file: the file stays
    assert os.path.isfile(os.path.join(local, 'part-0.lines'))
    manager.release(1)
    dataset.evict_shard(2)  # no unit of the file in use: it goes, and none of its units is ready
    assert not os.path.exists(os.path.join(local, 'part-0.lines'))
    assert [manager.is_ready(unit) for unit in range(3)] == [False] * 3
    assert dataset[3] == {'text': 'file 0 line 3'} and fetched[3:] == ['part-0.lines']


def test_the_cli_counts_and_downloads_each_file_once(tmp_path: Any, plugin: Any, capsys: Any) -> None:
    data = str(tmp_path / 'data')
    _write(data)
    assert main(['inspect', data, '--json']) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary['shards'], summary['files']) == (9, 3)
    assert summary['raw_bytes'] == sum(_sizes(data).values())
    assert main(['verify', data, '--quiet']) == 0
    assert 'Verified 9 units in 3 files, 15 samples' in capsys.readouterr().out


def test_units_of_one_file_must_follow_each_other(tmp_path: Any, plugin: Any) -> None:
    data = str(tmp_path / 'data')
    _write(data)
    plugin.builder.interleave = True
    with pytest.raises(IndexFormatError, match='must follow each other'):
        dataset = StreamingDataset(local=data, batch_size=1)
        list(dataset)


def test_a_new_index_version_rebuilds_the_kept_index(tmp_path: Any, plugin: Any) -> None:
    remote, local = str(tmp_path / 'remote'), str(tmp_path / 'local')
    texts = _write(remote)
    first = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert sorted(sample['text'] for sample in first) == sorted(texts)
    copies = {name: os.stat(os.path.join(local, name)).st_ino for name in _sizes(remote)}
    again = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert plugin.builder.builds == 1  # the same listing and index_version: the kept index is read
    assert again.streams[0].index_identity == first.streams[0].index_identity
    plugin.builder.index_version = 2  # the builder now writes another layout
    rebuilt = StreamingDataset(remote=remote, local=local, batch_size=1)
    assert plugin.builder.builds == 2 and rebuilt.streams[0].index_identity != first.streams[0].index_identity
    assert sorted(sample['text'] for sample in rebuilt) == sorted(texts)
    # The files did not change: the local copies were kept, not downloaded again.
    assert {name: os.stat(os.path.join(local, name)).st_ino for name in _sizes(remote)} == copies
