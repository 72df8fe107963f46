"""Every hook kind, implemented by an in-process third-party plugin and used by name through the public API."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import types

import numpy as np

from streaming_core import StreamingDataset
from streaming_core.errors import RemoteNotFoundError
from streaming_core.hookspecs import hookimpl
from streaming_core.ordering.partition import get_partitions
from streaming_core.reading.shard_entry import ShardReaderBase
from streaming_core.testing import registered_plugin
from tests.fixtures.data import ids_of, write_mds


def _plugin(**hooks):
    module = types.ModuleType('third_party')
    for name, function in hooks.items():
        setattr(module, name, hookimpl(function))
    return module


def test_custom_shuffle_and_batching_by_name(mds_dir):
    path = mds_dir(30)

    def reverse(sizes, ncn, seed, epoch, block):
        return np.arange(int(np.sum(sizes)), dtype=np.int64)[::-1].copy()

    def sequential(plan, world, epoch, done):
        return get_partitions('orig', plan.epoch_size, plan.num_canonical_nodes, world.num_nodes,
                              world.ranks_per_node, world.workers_per_rank, plan.batch_size, done)

    plugin = _plugin(register_shuffle_algorithms=lambda registry: registry.add('reverse', reverse),
                     register_batching_methods=lambda registry: registry.add('sequential', sequential))
    with registered_plugin(plugin, 'order-plugin'):
        reversed_ds = StreamingDataset(local=path, batch_size=1, shuffle=True, shuffle_algo='reverse',
                                       num_canonical_nodes=1)
        assert ids_of(reversed_ds) == list(range(29, -1, -1))
        plain = StreamingDataset(local=path, batch_size=2, batching_method='sequential', num_canonical_nodes=1)
        assert ids_of(plain) == list(range(30))


class MemoryBackend:
    """A storage backend over a dict, for the ``mem://`` scheme."""

    objects: dict[str, bytes] = {}

    def __init__(self, **options):
        self.options = options

    def download(self, url, path, *, timeout):
        if url not in self.objects:
            raise RemoteNotFoundError(f'Remote object not found: {url}')
        with open(path, 'wb') as handle:
            handle.write(self.objects[url])

    def upload(self, path, url, *, timeout):
        with open(path, 'rb') as handle:
            self.objects[url] = handle.read()

    def exists(self, url, *, timeout):
        return url in self.objects

    def list(self, url, *, timeout):
        return sorted(key for key in self.objects if key.startswith(url))


def test_custom_storage_backend_by_scheme(tmp_path):
    plugin = _plugin(register_storage_backends=lambda registry: registry.add('mem', MemoryBackend))
    with registered_plugin(plugin, 'mem-plugin'):
        write_mds((str(tmp_path / 'staging'), 'mem://bucket/ds'), 40, compression='gz')
        assert 'mem://bucket/ds/index.json' in MemoryBackend.objects
        dataset = StreamingDataset(remote='mem://bucket/ds', local=str(tmp_path / 'cache'), batch_size=2,
                                   shuffle=True)
        assert sorted(ids_of(dataset)) == list(range(40))


class LinesReader(ShardReaderBase):
    """A one-file format: UTF-8 lines, one sample per line."""

    format_name = 'lines'
    entry_keys = frozenset({'compression', 'format', 'hashes', 'raw_data', 'samples', 'size_limit', 'version',
                            'zip_data'})

    def open(self, paths):
        with open(paths[0], 'rb') as handle:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        lines = bytes(data).decode('utf-8').splitlines()
        data.close()
        return _LinesView(lines)


class _LinesView:
    def __init__(self, lines):
        self.lines = lines

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, index):
        return {'text': self.lines[index]}

    def close(self):
        pass


class LinesFormat:
    name = 'lines'
    writer = None

    def reader(self, entry, *, allow_unsafe_types=False, where=''):
        return LinesReader(entry, allow_unsafe_types=allow_unsafe_types, where=where)


def test_custom_shard_format_by_name(tmp_path):
    root = tmp_path / 'ds'
    root.mkdir()
    shards = []
    for i, words in enumerate((['a', 'b', 'c'], ['d', 'e'])):
        body = ''.join(f'{w}\n' for w in words).encode()
        (root / f'part{i}.txt').write_bytes(body)
        shards.append({'compression': None, 'format': 'lines', 'hashes': [],
                       'raw_data': {'basename': f'part{i}.txt', 'bytes': len(body), 'hashes': {}},
                       'samples': len(words), 'size_limit': None, 'version': 2, 'zip_data': None})
    (root / 'index.json').write_text(json.dumps({'shards': shards, 'version': 2}))
    plugin = _plugin(register_shard_formats=lambda registry: registry.add('lines', LinesFormat()))
    with registered_plugin(plugin, 'lines-plugin'):
        dataset = StreamingDataset(remote=str(root), local=str(tmp_path / 'cache'), batch_size=1)
        assert [s['text'] for s in dataset] == ['a', 'b', 'c', 'd', 'e']
        assert dataset[3] == {'text': 'd'}


def test_custom_codec_compressor_and_hash_by_name(tmp_path):
    import zlib

    class Upper:
        size = None
        unsafe = False

        def __init__(self, args=None):
            pass

        def encode(self, obj):
            return obj.upper().encode()

        def decode(self, data):
            return bytes(data).decode()

    class Deflate:
        extension = 'dfl'
        levels = range(1, 10)
        default_level = 6

        def compress(self, data, level):
            return zlib.compress(bytes(data), level or 6)

        def decompress(self, data, max_size=None):
            return zlib.decompress(bytes(data))

    plugin = _plugin(register_codecs=lambda registry: registry.add('upper', Upper),
                     register_compressors=lambda registry: registry.add('dfl', Deflate()),
                     register_hashes=lambda registry: registry.add('crc32', lambda d: format(zlib.crc32(d), '08x')))
    with registered_plugin(plugin, 'misc-plugin'):
        from streaming_mds import MDSWriter
        out = str(tmp_path / 'ds')
        with MDSWriter(out=out, columns={'t': 'upper'}, compression='dfl:9', hashes=['crc32']) as writer:
            for word in ('alpha', 'beta'):
                writer.write({'t': word})
        assert any(name.endswith('.mds.dfl') for name in os.listdir(out))
        copy = str(tmp_path / 'cache')
        dataset = StreamingDataset(remote=out, local=copy, batch_size=1, validate_hash='crc32')
        assert [s['t'] for s in dataset] == ['ALPHA', 'BETA']
    shutil.rmtree(copy)


def test_custom_stream_class_by_name(mds_dir):
    """A plugin's Stream subclass, chosen with stream_name= and built from stream_config=; its get_shards override
    decides the shards the dataset reads."""
    from streaming_core import Stream
    from streaming_core.errors import UnknownMethodError
    path = mds_dir(30, size_limit=256)
    assert StreamingDataset(local=path, batch_size=1).num_shards > 1

    class FirstShardOnly(Stream):
        def __init__(self, *, keep: int = 1, **kwargs):
            super().__init__(**kwargs)
            self.keep = keep

        def get_shards(self, world, allow_unsafe_types):
            return super().get_shards(world=world, allow_unsafe_types=allow_unsafe_types)[:self.keep]

    plugin = _plugin(register_streams=lambda registry: registry.add('first-shards', FirstShardOnly))
    with registered_plugin(plugin, 'stream-plugin'):
        dataset = StreamingDataset(local=path, batch_size=1, stream_name='first-shards', stream_config={'keep': 1})
        assert type(dataset.streams[0]) is FirstShardOnly
        first = int(dataset.samples_per_shard[0])
        assert dataset.num_shards == 1 and ids_of(dataset) == list(range(first))
    try:
        StreamingDataset(local=path, batch_size=1, stream_name='first-shards')
    except UnknownMethodError as err:
        assert 'first-shards' in str(err)
    else:
        raise AssertionError('a stream name whose plugin is gone must be refused')
