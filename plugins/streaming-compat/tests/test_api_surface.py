"""The reference's public API is importable at its paths through ``import streaming``, and it is our engine."""

from __future__ import annotations

import importlib
import os
import pickle
import textwrap
import warnings
from typing import Any

import numpy as np
import pytest
import streaming
from streaming.base.array import Array

import streaming_core
from tests.deps import require

# The reference's documented modules and the names each provides (spec formats.md / runtime.md).
API = {
    'streaming': ['StreamingDataset', 'Stream', 'StreamingDataLoader', 'LocalDataset', 'MDSWriter', 'JSONWriter',
                  'CSVWriter', 'TSVWriter', 'XSVWriter', 'vision', 'text', 'multimodal'],
    'streaming.base': ['StreamingDataset', 'Stream', 'StreamingDataLoader', 'LocalDataset', 'MDSWriter',
                       'JSONWriter', 'CSVWriter', 'TSVWriter', 'XSVWriter'],
    'streaming.base.array': ['Array'],
    'streaming.base.compression': ['compress', 'decompress', 'get_compression_extension', 'get_compressions',
                                   'is_compression', 'Brotli', 'Bzip2', 'Gzip', 'Snappy', 'Zstandard'],
    'streaming.base.hashing': ['get_hash', 'get_hashes', 'is_hash'],
    'streaming.base.util': ['get_list_arg', 'wait_for_file_to_exist', 'bytes_to_int', 'number_abbrev_to_int',
                            'clean_stale_shared_memory', 'get_import_exception_message', 'merge_index', 'retry'],
    'streaming.base.distributed': ['all_gather', 'barrier', 'broadcast', 'get_rank', 'get_local_rank',
                                   'get_local_world_size', 'get_world_size'],
    'streaming.base.sampling': ['get_sampling'],
    'streaming.base.partition': ['get_partitions', 'get_partitions_orig', 'get_partitions_relaxed'],
    'streaming.base.shuffle': ['get_shuffle', 'get_shuffle_naive', 'get_shuffle_py1br', 'get_shuffle_py1e',
                               'get_shuffle_py1s', 'get_shuffle_py2s'],
    'streaming.base.batching': ['generate_work'],
    'streaming.base.world': ['World'],
    'streaming.base.spanner': ['Spanner'],
    'streaming.base.stream': ['Stream', 'streams_registry'],
    'streaming.base.registry_utils': ['create_registry', 'construct_from_registry', 'import_file', 'TypedRegistry'],
    'streaming.base.storage': ['CloudUploader', 'S3Uploader', 'GCSUploader', 'OCIUploader', 'LocalUploader',
                               'AzureUploader', 'AzureDataLakeUploader', 'HFUploader', 'CloudDownloader',
                               'S3Downloader', 'SFTPDownloader', 'GCSDownloader', 'OCIDownloader', 'AzureDownloader',
                               'AzureDataLakeDownloader', 'HFDownloader', 'DatabricksUnityCatalogDownloader',
                               'DBFSDownloader', 'AlipanDownloader', 'LocalDownloader'],
    'streaming.base.storage.upload': ['CloudUploader', 'DatabricksUnityCatalogUploader', 'DBFSUploader',
                                      'AlipanUploader'],
    'streaming.base.converters': ['dataframe_to_mds', 'infer_dataframe_schema', 'is_json_compatible'],
    'streaming.base.format': ['CSVWriter', 'FileInfo', 'get_index_basename', 'JSONWriter', 'MDSWriter', 'Reader',
                              'reader_from_json', 'TSVWriter', 'XSVWriter'],
    'streaming.base.format.index': ['get_index_basename'],
    'streaming.base.format.mds': ['MDSReader', 'MDSWriter'],
    'streaming.base.format.mds.encodings': ['get_mds_encoded_size', 'get_mds_encodings', 'is_mds_encoding',
                                            'mds_decode', 'mds_encode', 'is_mds_encoding_safe'],
    'streaming.base.format.json': ['JSONReader', 'JSONWriter'],
    'streaming.base.format.json.encodings': ['is_json_encoded', 'is_json_encoding'],
    'streaming.base.format.xsv': ['CSVReader', 'CSVWriter', 'TSVReader', 'TSVWriter', 'XSVReader', 'XSVWriter'],
    'streaming.base.format.xsv.encodings': ['is_xsv_encoding', 'xsv_decode', 'xsv_encode'],
    'streaming.base.constant': ['TICK', 'SHM_TO_CLEAN'],
    'streaming.vision': ['StreamingADE20K', 'StreamingCIFAR10', 'StreamingCOCO', 'StreamingImageNet'],
    'streaming.text': ['StreamingPile', 'StreamingC4', 'StreamingEnWiki'],
    'streaming.multimodal': ['StreamingInsideWebVid', 'StreamingOutsideDTWebVid', 'StreamingOutsideGIWebVid'],
}


@pytest.mark.parametrize('module', sorted(API))
def test_every_documented_name_imports(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in API[module] if not hasattr(mod, name)]
    assert not missing, f'{module} lacks {missing}'
    assert set(API[module]) <= set(dir(mod)) or not hasattr(mod, '__all__')


def test_it_is_our_engine_not_a_copy() -> None:
    assert streaming.ENGINE == 'streaming-core'
    assert streaming.__version__ == '0.13.0'
    assert os.path.join('plugins', 'streaming-compat') in streaming.__file__
    assert issubclass(streaming.StreamingDataset, streaming_core.StreamingDataset)
    assert streaming.Stream is streaming_core.Stream
    assert streaming.StreamingDataLoader is streaming_core.StreamingDataLoader
    assert streaming.MDSWriter is streaming_core.MDSWriter
    assert streaming.JSONWriter is streaming_core.JSONWriter
    assert streaming.base.util.merge_index is streaming_core.merge_index
    for cls in (streaming.StreamingDataset, streaming.LocalDataset):
        assert issubclass(cls, Array)


def test_dataset_classes_are_streaming_datasets() -> None:
    import streaming.multimodal
    import streaming.text
    import streaming.vision
    for cls in (streaming.vision.StreamingCIFAR10, streaming.vision.StreamingImageNet, streaming.vision.StreamingCOCO,
                streaming.vision.StreamingADE20K, streaming.text.StreamingC4, streaming.text.StreamingPile,
                streaming.text.StreamingEnWiki, streaming.multimodal.StreamingInsideWebVid):
        assert issubclass(cls, streaming.StreamingDataset), cls
        assert issubclass(cls, streaming_core.StreamingDataset), cls


def test_our_loader_and_users_isinstance_checks_hold(int_dataset: str) -> None:
    dataset = streaming.StreamingDataset(local=int_dataset, batch_size=4)
    assert isinstance(dataset, streaming_core.StreamingDataset)
    assert isinstance(dataset, streaming.base.dataset.StreamingDataset)
    loader = streaming.StreamingDataLoader(dataset, batch_size=4)
    ids = []
    for batch in loader:
        ids += [int(i) for i in batch['id']]
        if len(ids) == 8:
            state = loader.state_dict()  # only produced when the loader recognises a StreamingDataset
    assert sorted(ids) == list(range(40))
    assert state is not None and (state['epoch'], state['sample_in_epoch']) == (0, 8)


def test_numpy_scalar_arguments_are_numbers_as_in_the_reference(int_dataset: str, tmp_path: Any) -> None:
    """Arguments computed with numpy (a count from an array, a ratio) are numpy scalars; the reference takes them
    where it takes numbers. Ours refused several ("must be a non-negative number, got np.int64(10)")."""
    stream = streaming.Stream(local=int_dataset, choose=np.int64(10), download_retry=np.int64(1),
                              download_timeout=np.float32(5))
    assert (type(stream.choose), type(stream.download_retry), type(stream.download_timeout)) == (int, int, float)
    assert len(streaming.StreamingDataset(streams=[stream], batch_size=2)) == 10
    repeated = streaming.Stream(local=int_dataset, repeat=np.float32(1.5))
    assert type(repeated.repeat) is float
    assert len(streaming.StreamingDataset(streams=[repeated], batch_size=2)) == 60
    limited = streaming.StreamingDataset(local=int_dataset, batch_size=4, cache_limit=np.int64(10 ** 9))
    assert len(limited) == 40
    with streaming.MDSWriter(out=str(tmp_path / 'out'), columns={'id': 'int'}, size_limit=np.int64(1 << 20),
                             retry=np.int64(2)) as writer:
        writer.write({'id': 1})
    for bad in (dict(choose=np.int64(-1)), dict(download_retry=np.float64(1.5)), dict(download_timeout=np.int64(0))):
        with pytest.raises(ValueError):
            streaming.Stream(local=int_dataset, **bad)


def test_numpy_style_indexing(int_dataset: str) -> None:
    dataset = streaming.StreamingDataset(local=int_dataset, batch_size=4)
    assert dataset[-1]['id'] == 39
    assert [s['id'] for s in dataset[3:6]] == [3, 4, 5]
    assert [s['id'] for s in dataset[np.array([7, 0])]] == [7, 0]
    assert [[s['id'] for s in row] for row in dataset[[[1, 2], [3]]]] == [[1, 2], [3]]
    with pytest.raises(ValueError, match='Unsupported argument type'):
        dataset['x']
    with pytest.raises(IndexError):
        dataset[40]
    local = streaming.LocalDataset(int_dataset)
    assert len(local) == 40 and local.size == 40 and local[[0, -1]] == [{'id': 0, 'text': '0'},
                                                                        {'id': 39, 'text': '39'}]


def test_vision_classes_take_the_reference_order_defaults(tmp_path: Any) -> None:
    from PIL import Image
    from streaming.vision import StreamingCIFAR10
    out = str(tmp_path / 'cifar')
    with streaming.MDSWriter(out=out, columns={'x': 'pil', 'y': 'int'}) as writer:
        for i in range(6):
            writer.write({'x': Image.new('RGB', (32, 32), (i, 0, 0)), 'y': i % 10})
    dataset = StreamingCIFAR10(local=out, split=None, batch_size=2, transform=lambda im: im.getpixel((0, 0))[0])
    assert (dataset.partition_algo, dataset.shuffle_algo, dataset.shuffle_block_size) == ('orig', 'py1s', 1 << 18)
    assert dataset[4] == (4, 4)
    assert StreamingCIFAR10(local=out, batch_size=2, shuffle_algo='py1e').shuffle_algo == 'py1e'


def test_outside_webvid_refuses_clearly() -> None:
    from streaming.multimodal import StreamingOutsideGIWebVid
    with pytest.raises(NotImplementedError, match='StreamingInsideWebVid'):
        StreamingOutsideGIWebVid(local='/nowhere')


def test_text_classes_keep_the_reference_arguments(tmp_path: Any) -> None:
    from streaming.text import StreamingC4
    out = str(tmp_path / 'c4')
    with streaming.MDSWriter(out=out, columns={'text': 'str', 'timestamp': 'str', 'url': 'str'}) as writer:
        writer.write({'text': 'hello world', 'timestamp': 't', 'url': 'u'})
    with pytest.raises(ValueError, match="group_method='concat' is not supported"):
        StreamingC4(local=out, tokenizer_name='gpt2', max_seq_len=8, group_method='concat')
    records = StreamingC4(local=out, batch_size=1)
    assert records[0] == {'text': 'hello world', 'timestamp': 't', 'url': 'u'}


def test_world_takes_the_reference_constructor() -> None:
    from streaming.base.world import World
    world = World(2, 4, 3, 17)  # nodes, ranks per node, workers per rank, global worker index
    assert (world.num_nodes, world.ranks_per_node, world.workers_per_rank) == (2, 4, 3)
    assert (world.rank, world.worker_of_rank, world.node, world.is_local_leader) == (5, 2, 1, False)
    assert isinstance(world, streaming_core.World)
    assert World(rank=3, world_size=4, local_world_size=2).node == 1
    with pytest.raises(ValueError, match='global worker index'):
        World(1, 1, 2, 2)


def test_generate_work_is_the_dataset_plan(int_dataset: str) -> None:
    from streaming.base.batching import generate_work
    from streaming.base.world import World
    dataset = streaming.StreamingDataset(local=int_dataset, batch_size=4, shuffle=True, num_canonical_nodes=2)
    plan = generate_work('random', dataset, World(2, 2, 1, 0), 0, 0)
    assert plan.shape[:3] == (2, 2, 1)
    assert sorted(plan[plan >= 0].tolist()) == list(range(40))
    with pytest.raises(ValueError, match='differs from the dataset'):
        generate_work('stratified', dataset, World(1, 1, 1, 0), 0, 0)


def test_shuffle_sampling_partition_functions() -> None:
    from streaming.base.partition import get_partitions
    from streaming.base.sampling import get_sampling
    from streaming.base.shuffle import get_shuffle
    sizes = np.array([7, 3, 10, 1, 5, 9, 4], np.int64)
    for algo in ('naive', 'py1e', 'py1br', 'py1s', 'py2s'):
        with warnings.catch_warnings():  # block size 8 < the largest shard (10): py1e warns, as the reference does
            warnings.filterwarnings('ignore', 'Shuffle block size was smaller than shard size')
            order = get_shuffle(algo, sizes, 2, 9176, 0, 8)
        assert sorted(order.tolist()) == list(range(39)), algo
    assert get_sampling(np.array([5, 5, 5]), 7, 1, 9176, 0, True).tolist() == [1, 4, 2]  # runtime.md 1.5
    assert get_sampling(np.array([5, 5, 5]), 22, 2, 9176, 3, True).tolist() == [7, 5, 10]
    parts = get_partitions('orig', 10, 2, 2, 1, 1, 1)
    assert sorted(parts[parts >= 0].tolist()) == list(range(10))


def test_importing_stays_lazy(python: Any) -> None:
    result = python(textwrap.dedent('''
        import sys
        import streaming
        heavy = [m for m in ('torch', 'boto3', 'google.cloud.storage', 'pyspark') if m in sys.modules]
        print(heavy)
    '''))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '[]'


def test_is_json_compatible_is_the_core_check() -> None:
    require('pyspark')
    from pyspark.sql import types as t
    from streaming.base.converters import is_json_compatible

    from streaming_core.tools.convert import spark_types
    assert spark_types._json_compatible is spark_types.json_compatible  # the old name still works
    nested = t.StructType([t.StructField('a', t.ArrayType(t.LongType())), t.StructField('b', t.StringType())])
    assert is_json_compatible(nested) and spark_types.json_compatible(nested)
    assert is_json_compatible(t.MapType(t.StringType(), t.DoubleType()))
    assert not is_json_compatible(t.MapType(t.LongType(), t.DoubleType()))  # JSON keys are strings
    assert is_json_compatible(t.StringType()) and is_json_compatible(t.LongType())  # as the reference
    assert not is_json_compatible(t.ArrayType(t.BinaryType()))


def test_spanner_takes_the_reference_signature() -> None:
    from streaming.base.spanner import Spanner
    for spanner in (Spanner(np.array([3, 0, 5])), Spanner(np.array([3, 0, 5]), span_size=2),
                    Spanner(np.array([3, 0, 5]), 7)):
        assert [spanner[i] for i in range(8)] == [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4)]
    with pytest.raises(IndexError):
        Spanner(np.array([3, 0, 5]))[8]


def test_the_reference_vision_base_class_can_be_subclassed(tmp_path):
    """``streaming.vision.base.StreamingVisionDataset``: ``get_item`` gives the ``(x, y)`` pair after the
    transforms (each applied once) on ``dataset[i]``, slices, ``get_item`` and a DataLoader with workers; a subclass
    written the reference's way (``super().get_item``) works; without a transform ``x`` becomes a tensor."""
    import numpy as np
    from PIL import Image
    from streaming import MDSWriter, StreamingDataLoader
    from streaming.vision.base import StreamingVisionDataset
    with MDSWriter(out=str(tmp_path / 'ds'), columns={'x': 'int', 'y': 'int'}) as writer:
        for i in range(40):
            writer.write({'x': i, 'y': 100 + i})

    class Pairs(StreamingVisionDataset):
        pass

    class Flipped(StreamingVisionDataset):  # the reference's way of extending it
        def get_item(self, idx, retry=7):
            x, y = super().get_item(idx)
            return y, x

    dataset = Pairs(local=str(tmp_path / 'ds'), batch_size=4, shuffle=True, num_canonical_nodes=1,
                    transform=_plus_one, target_transform=_negate)
    assert dataset.shuffle_algo == 'py1s' and dataset.partition_algo == 'orig'  # the reference's defaults
    assert dataset[3] == (4, -103) and dataset.get_item(3) == (4, -103) and dataset[3:5] == [(4, -103), (5, -104)]
    seen = [(int(x), int(y)) for xs, ys in StreamingDataLoader(dataset, batch_size=4, num_workers=2)
            for x, y in zip(xs, ys)]
    assert sorted(seen) == [(i + 1, -(100 + i)) for i in range(40)]
    flipped = Flipped(local=str(tmp_path / 'ds'), batch_size=4, transform=_plus_one)
    assert flipped[3] == (103, 4)
    with pytest.raises(ValueError, match='Only transforms or transform/target_transform'):
        Pairs(local=str(tmp_path / 'ds'), batch_size=4, transforms=lambda x, y: (x, y), transform=_plus_one)

    with MDSWriter(out=str(tmp_path / 'img'), columns={'x': 'pil', 'y': 'int'}) as writer:
        writer.write({'x': Image.fromarray(np.full((2, 3, 3), 255, np.uint8)), 'y': 7})
    x, y = StreamingVisionDataset(local=str(tmp_path / 'img'), batch_size=1)[0]
    assert tuple(x.shape) == (3, 2, 3) and float(x.max()) == 1.0 and y == 7


def _plus_one(x):
    return x + 1


def _negate(y):
    return -y


@pytest.mark.parametrize('module, name', [
    ('streaming.base.format.mds.writer', 'MDSWriter'), ('streaming.base.format.mds.reader', 'MDSReader'),
    ('streaming.base.format.json.writer', 'JSONWriter'), ('streaming.base.format.json.reader', 'JSONReader'),
    ('streaming.base.format.xsv.writer', 'CSVWriter'), ('streaming.base.format.xsv.reader', 'XSVReader'),
    ('streaming.vision.cifar10', 'StreamingCIFAR10'), ('streaming.vision.imagenet', 'StreamingImageNet'),
    ('streaming.vision.coco', 'StreamingCOCO'), ('streaming.vision.ade20k', 'StreamingADE20K'),
    ('streaming.text.c4', 'StreamingC4'), ('streaming.text.pile', 'StreamingPile'),
    ('streaming.text.enwiki', 'StreamingEnWiki'),
    ('streaming.base.converters.dataframe_to_mds', 'dataframe_to_mds'),
])
def test_the_reference_module_paths_import(module, name):
    """``from streaming.base.format.mds.writer import MDSWriter`` (the reference's module layout) gives our class."""
    import importlib
    parent = module.rsplit('.', 1)[0]  # streaming.base.format.mds, streaming.vision, streaming.text
    assert getattr(importlib.import_module(module), name) is getattr(importlib.import_module(parent), name)


@pytest.mark.parametrize('writer, compression', [('MDSWriter', 'zstd'), ('MDSWriter', None), ('JSONWriter', 'gz')])
def test_dataset_shards_is_the_references_list_of_readers(tmp_path: Any, writer: str, compression: Any) -> None:
    """``ds.shards`` is a list of readers with the reference's API: the sizes users sum to size a dataset, the
    files, and a shard's samples from the local copy."""
    import json
    remote = str(tmp_path / 'remote')
    with getattr(streaming, writer)(out=remote, columns={'id': 'int', 'text': 'str'}, size_limit=300,
                                    compression=compression) as out:
        for i in range(40):
            out.write({'id': i, 'text': str(i)})
    entries = json.load(open(os.path.join(remote, 'index.json')))['shards']
    dataset = streaming.StreamingDataset(remote=remote, local=str(tmp_path / 'local'), batch_size=4)
    shards = dataset.shards
    assert isinstance(shards, list) and len(shards) == len(entries) > 1 and dataset.shards is shards
    raw = [sum(e[key]['bytes'] for key in ('raw_data', 'raw_meta') if e.get(key)) for e in entries]
    zipped = [sum(e[key]['bytes'] for key in ('zip_data', 'zip_meta') if e.get(key)) for e in entries]
    assert [s.get_raw_size() for s in shards] == raw
    assert [s.get_zip_size() for s in shards] == (zipped if compression else [None] * len(entries))
    assert [s.get_max_size() for s in shards] == [r + z for r, z in zip(raw, zipped)]
    assert [s.get_persistent_size(True) for s in shards] == [r + z for r, z in zip(raw, zipped)]
    assert [s.get_persistent_size(False) for s in shards] == raw
    first = shards[0]
    assert first.raw_data.basename == entries[0]['raw_data']['basename']
    assert (first.zip_data.basename if compression else first.zip_data) == (
        entries[0]['zip_data']['basename'] if compression else None)
    assert (first.raw_meta is not None) == (writer == 'JSONWriter')
    assert [len(s) for s in shards] == [e['samples'] for e in entries]
    assert sorted(int(s['id']) for s in dataset) == list(range(40))  # the shards are now in local
    assert [int(first[i]['id']) for i in range(len(first))] == list(range(len(first)))
    assert [int(sample['id']) for sample in first] == list(range(len(first)))  # one view for the shard
    again = pickle.loads(pickle.dumps(dataset))  # the readers' open views stay behind
    assert isinstance(again.shards, list) and len(again.shards) == len(entries)
