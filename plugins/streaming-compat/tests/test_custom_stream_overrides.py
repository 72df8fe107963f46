"""Custom streams written for the reference: the engine calls the ``Stream`` methods they override
(``_download_file``, ``_decompress_shard_part``, ``prepare_shard``, ``get_shards`` by keyword), in the main process
and in DataLoader workers, and a stream class registered by name reaches the core's ``stream`` registry."""

from __future__ import annotations

import os
import shutil
import textwrap
from typing import Any

import pytest
from streaming import MDSWriter, Stream, StreamingDataLoader, StreamingDataset
from streaming.base.registry_utils import save_registry
from streaming.base.stream import streams_registry

from streaming_core.hookspecs import KINDS
from streaming_core.ordering.world import World

SAMPLES = 40


def _record(log: str, line: str) -> None:
    """Append one line to ``log`` (one write per line: safe from several processes)."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + '\n').encode())
    finally:
        os.close(fd)


def _lines(log: str) -> list[str]:
    if not os.path.exists(log):
        return []
    with open(log) as handle:
        return handle.read().split()


@pytest.fixture
def mirrored(tmp_path: Any) -> dict[str, str]:
    """A dataset written to ``mirror``; ``remote`` holds only its ``index.json`` (a stream reading it must fetch the
    shards from the mirror)."""
    mirror, remote = str(tmp_path / 'mirror'), str(tmp_path / 'remote')
    with MDSWriter(out=mirror, columns={'id': 'int', 'text': 'str'}, size_limit=300, compression='gz',
                   hashes=['sha1']) as writer:
        for i in range(SAMPLES):
            writer.write({'id': i, 'text': str(i)})
    os.makedirs(remote)
    shutil.copy(os.path.join(mirror, 'index.json'), remote)
    return {'mirror': mirror, 'remote': remote, 'local': str(tmp_path / 'local'), 'log': str(tmp_path / 'calls')}


class MirrorStream(Stream):
    """Fetches every file from a mirror directory instead of the remote (the reference's ``_download_file``)."""

    def __init__(self, *, mirror: str, log: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mirror, self.log = mirror, log

    def _download_file(self, from_basename: str, to_basename: str | None = None) -> str:
        _record(self.log, f'download:{from_basename}')
        local = os.path.join(self.local_dir, to_basename or from_basename)
        shutil.copy(os.path.join(self.mirror, from_basename), local)
        return local


class CountingDecompressStream(MirrorStream):
    """Also records each decompression, then lets the engine decompress."""

    def _decompress_shard_part(self, zip_info: Any, zip_filename: str, raw_filename: str,
                               compression: str | None) -> None:
        _record(self.log, f'decompress:{zip_info.basename}:{compression}')
        super()._decompress_shard_part(zip_info, zip_filename, raw_filename, compression)


class PrepareStream(Stream):
    """Prepares a shard itself (the reference's ``prepare_shard``): copies its raw file from the mirror."""

    def __init__(self, *, mirror: str, log: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mirror, self.log = mirror, log

    def prepare_shard(self, shard: Any) -> int:
        delta = 0
        for raw, zipped in shard.parts:
            _record(self.log, f'prepare:{raw.basename}')
            source = os.path.join(self.mirror, zipped.basename)
            target = os.path.join(self.local_dir, zipped.basename)
            shutil.copy(source, target)
            delta += os.path.getsize(target)
            self._decompress_shard_part(zipped, target, os.path.join(self.local_dir, raw.basename), 'gz')
        return delta


class FirstShardsStream(Stream):
    """Keeps the first two shards only (the reference's ``get_shards(world, allow_unsafe_types)``)."""

    def __init__(self, *, log: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log = log

    def get_shards(self, world: Any, allow_unsafe_types: bool) -> list[Any]:  # type: ignore[override]
        _record(self.log, f'get_shards:{type(world).__name__}:{allow_unsafe_types}')
        return super().get_shards(world, allow_unsafe_types)[:2]


def _ids(dataset: StreamingDataset, workers: int) -> list[int]:
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=workers)
    return sorted(int(i) for batch in loader for i in batch['id'])


def _shards(mirror: str) -> list[str]:
    return sorted(name for name in os.listdir(mirror) if name.endswith('.mds.gz'))


@pytest.mark.parametrize('workers', [0, 2])
def test_download_file_and_decompress_overrides(mirrored: dict[str, str], workers: int) -> None:
    with save_registry():
        streams_registry.register('mirror', func=CountingDecompressStream)
        dataset = StreamingDataset(remote=mirrored['remote'], local=mirrored['local'], stream_name='mirror',
                                   stream_config={'mirror': mirrored['mirror'], 'log': mirrored['log']},
                                   batch_size=4)
        assert type(dataset.streams[0]) is CountingDecompressStream
        assert _ids(dataset, workers) == list(range(SAMPLES))
    calls = _lines(mirrored['log'])
    shards = _shards(mirrored['mirror'])
    assert sorted(c for c in calls if c.startswith('download:')) == [f'download:{s}' for s in shards]  # once each
    assert sorted(c for c in calls if c.startswith('decompress:')) == [f'decompress:{s}:gz' for s in shards]


@pytest.mark.parametrize('workers', [0, 2])
def test_prepare_shard_override(mirrored: dict[str, str], workers: int) -> None:
    stream = PrepareStream(remote=mirrored['remote'], local=mirrored['local'], mirror=mirrored['mirror'],
                           log=mirrored['log'])
    dataset = StreamingDataset(streams=[stream], batch_size=4)
    assert _ids(dataset, workers) == list(range(SAMPLES))
    assert dataset[7]['id'] == 7
    calls = _lines(mirrored['log'])
    assert sorted(calls) == sorted(f'prepare:{s[:-3]}' for s in _shards(mirrored['mirror']))


@pytest.mark.parametrize('workers', [0, 2])
def test_get_shards_override_called_by_keyword(mirrored: dict[str, str], workers: int) -> None:
    log = mirrored['log']
    dataset = StreamingDataset(streams=[FirstShardsStream(local=mirrored['mirror'], log=log)], batch_size=4)
    kept = int(dataset.samples_per_shard.sum())
    assert dataset.num_shards == 2 and 0 < kept < SAMPLES
    assert _ids(dataset, workers) == list(range(kept))
    assert _lines(log) == [f'get_shards:{World.__name__}:False']  # once, at construction


def test_a_registered_stream_is_in_the_core_registry(int_dataset: str) -> None:
    assert 'stream' in KINDS
    from streaming_core.machinery.lookup import get_registry
    with save_registry():
        streams_registry.register('core_seen', func=FirstShardsStream)
        assert get_registry('stream').get('core_seen') is FirstShardsStream
        from streaming_core import StreamingDataset as CoreDataset
        dataset = CoreDataset(local=int_dataset, stream_name='core_seen', stream_config={'log': os.devnull},
                              batch_size=4)
        assert type(dataset.streams[0]) is FirstShardsStream and dataset.num_shards == 2
    assert 'core_seen' not in get_registry('stream')


def test_core_entry_point_registers_a_stream_class(tmp_path: Any, int_dataset: str, python: Any) -> None:
    """A plugin distribution registers its stream through the core hook ``register_streams``."""
    assert 'stream' in KINDS
    site = tmp_path / 'site'
    (site / 'core_streams').mkdir(parents=True)
    (site / 'core_streams' / '__init__.py').write_text(textwrap.dedent('''
        from streaming_core import Stream
        from streaming_core.plugin_api import hookimpl

        class PluginStream(Stream):
            def __init__(self, *, colour='none', **kwargs):
                super().__init__(**kwargs)
                self.colour = colour

        @hookimpl
        def register_streams(registry):
            registry.add('plugin_stream', PluginStream)
    '''))
    dist = site / 'core_streams-1.0.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: core-streams\nVersion: 1.0\n')
    (dist / 'entry_points.txt').write_text('[streaming_core]\ncore_streams = core_streams\n')
    result = python(textwrap.dedent(f'''
        from streaming_core import StreamingDataset
        ds = StreamingDataset(local={int_dataset!r}, stream_name='plugin_stream', stream_config={{'colour': 'red'}},
                              batch_size=4)
        print(type(ds.streams[0]).__name__, ds.streams[0].colour, ds[3]['id'])
    '''), env={'PYTHONPATH': str(site), 'STREAMING_CORE_PLUGIN_MANIFEST': '0'})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['PluginStream', 'red', '3']


def test_unknown_stream_name_in_the_core_is_a_value_error(int_dataset: str) -> None:
    from streaming_core import StreamingDataset as CoreDataset
    from streaming_core.errors import UnknownMethodError
    with pytest.raises(ValueError, match="stream_name='nope'") as info:
        CoreDataset(local=int_dataset, stream_name='nope')
    assert isinstance(info.value, UnknownMethodError)


class TruncatingStream(MirrorStream):
    """Fetches a shorter file than the index declares."""

    def _download_file(self, from_basename: str, to_basename: str | None = None) -> str:
        local = super()._download_file(from_basename, to_basename)
        with open(local, 'r+b') as handle:
            handle.truncate(os.path.getsize(local) - 1)
        return local


class TamperingStream(MirrorStream):
    """Fetches a file of the right size with one byte changed."""

    def _download_file(self, from_basename: str, to_basename: str | None = None) -> str:
        local = super()._download_file(from_basename, to_basename)
        with open(local, 'r+b') as handle:
            handle.seek(-1, os.SEEK_END)
            last = handle.read(1)
            handle.seek(-1, os.SEEK_END)
            handle.write(bytes([last[0] ^ 0xFF]))
        return local


def test_an_overriding_download_is_still_checked(mirrored: dict[str, str], tmp_path: Any) -> None:
    """What a subclass's ``_download_file`` fetched is checked against the index: its size always, its hash with
    ``validate_hash``."""
    args = {'remote': mirrored['remote'], 'mirror': mirrored['mirror'], 'log': mirrored['log']}
    truncated = StreamingDataset(streams=[TruncatingStream(local=str(tmp_path / 'a'), **args)], batch_size=4)
    with pytest.raises(OSError, match='the index declares'):
        truncated[0]
    tampered = StreamingDataset(streams=[TamperingStream(local=str(tmp_path / 'b'), **args)], batch_size=4,
                                validate_hash='sha1')
    with pytest.raises(ValueError, match='Checksum failure'):
        tampered[0]
