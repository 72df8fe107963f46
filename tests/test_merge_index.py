"""merge_index in both call forms: partitions written in parallel by a process pool, merged in order, read back;
remote sources and targets through the storage registry; argument and data errors."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
from typing import Any

import pytest

from streaming_core.errors import IndexFormatError, UnsafePathError
from streaming_core.writing.merge import merge_index
from tests.test_writer_upload import DirPlugin, dirfs  # noqa: F401 - the fixture is used by name

mds = pytest.importorskip('streaming_mds')
PARTITIONS = ['0', '1', '10', '2']  # lexicographic order: 0, 1, 10, 2


def write_partition(args: tuple[Any, ...]) -> str:
    """Write one partition (run in a pool worker): ``(out, name, first id[, keep_local])``; returns its index path."""
    out, name, start = args[:3]
    keep_local = len(args) > 3 and args[3]
    with mds.MDSWriter(columns={'id': 'int', 'part': 'str'}, out=out, size_limit=300, compression='zstd',
                       keep_local=keep_local) as writer:
        for i in range(start, start + 25):
            writer.write({'id': i, 'part': name})
    local = out[0] if isinstance(out, tuple) else out
    return os.path.join(local, 'index.json')


def write_all(root: str, remote: str | None = None, pool: bool = False) -> list[str]:
    jobs = [((os.path.join(root, name), f'{remote}/{name}') if remote else os.path.join(root, name), name, 100 * k)
            for k, name in enumerate(PARTITIONS)]
    if pool:
        with multiprocessing.get_context('fork').Pool(2) as workers:
            return workers.map(write_partition, jobs)
    return [write_partition(job) for job in jobs]


def read_merged(root: str) -> list[tuple[str, int]]:
    """``(partition, id)`` of every sample of the merged dataset, shard by shard, with our readers."""
    from streaming_core.reading.index_file import load_index, shard_readers
    from streaming_core.storage.compression import decompress
    index_path = os.path.join(root, 'index.json')
    out = []
    for reader in shard_readers(load_index(index_path), index_path):
        raw, zipped = reader.parts[0]
        path = os.path.join(root, raw.basename)
        if not os.path.exists(path):
            with open(os.path.join(root, zipped.basename), 'rb') as handle:
                data = decompress(reader.compression, handle.read(), raw.bytes)
            with open(path, 'wb') as handle:
                handle.write(data)
        with reader.open([path]) as view:
            out.extend((view[i]['part'], view[i]['id']) for i in range(len(view)))
    return out


def expected(order: list[str]) -> list[tuple[str, int]]:
    return [(name, 100 * PARTITIONS.index(name) + i) for name in order for i in range(25)]


@pytest.mark.slow
def test_from_root_with_pool_written_partitions(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    write_all(root, pool=True)
    assert merge_index(root) == os.path.join(root, 'index.json')
    text = (tmp_path / 'out' / 'index.json').read_text()
    assert text.startswith('{"version": 2, "shards": [{"column_encodings": ')
    index = json.loads(text)
    basenames = [s['raw_data']['basename'] for s in index['shards']]
    assert basenames[0] == '0/shard.00000.mds'
    assert [b.split('/')[0] for b in basenames] == sorted([b.split('/')[0] for b in basenames], key=lambda p: p)
    assert len(set(basenames)) == sum(len([f for f in os.listdir(os.path.join(root, p)) if f.endswith('.zstd')])
                                      for p in PARTITIONS)
    assert all(s['zip_data']['basename'] == s['raw_data']['basename'] + '.zstd' for s in index['shards'])
    assert read_merged(root) == expected(['0', '1', '10', '2'])
    merge_index(root, keep_local=True)  # running it again overwrites the merged index
    assert json.loads((tmp_path / 'out' / 'index.json').read_text()) == index


def test_from_list_keeps_the_given_order(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    paths = write_all(root)
    order = [paths[3], paths[0], paths[0] + '/'.rstrip('/'), paths[2], paths[1]]
    merge_index(order, root)
    assert read_merged(root) == expected(['2', '0', '10', '1'])


def test_keyword_call_forms(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    paths = write_all(root)
    merge_index(index_file_urls=paths[:2], out=root, keep_local=True, download_timeout=5)
    assert read_merged(root) == expected(['0', '1'])
    merge_index(out=root)
    assert read_merged(root) == expected(['0', '1', '10', '2'])


@pytest.mark.parametrize('args,kwargs', [((), {}), ((5,), {}), (([],), {'out': 'x', 'bogus': 1}),
                                         (('out', True, 60, 'extra'), {}), ((['a'],), {})])
def test_invalid_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match='Invalid arguments to merge_index'):
        merge_index(*args, **kwargs)


def test_missing_partitions(tmp_path: Any) -> None:
    with pytest.raises(FileNotFoundError, match='Check data availability'):
        merge_index([str(tmp_path / 'nope' / 'index.json')], str(tmp_path))
    with pytest.raises(FileNotFoundError, match='Check data availability'):
        merge_index([(str(tmp_path / 'nope' / 'index.json'), '')], str(tmp_path))
    with pytest.raises(FileNotFoundError, match='no partition index.json'):
        merge_index(str(tmp_path))


def test_bad_partition_indexes(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    paths = write_all(root)
    with open(paths[0]) as handle:
        index = json.load(handle)
    index['version'] = 3
    with open(paths[0], 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(IndexFormatError, match='Unsupported streaming data version'):
        merge_index(root)
    index['version'] = 2
    index['shards'][0]['raw_data']['basename'] = '../escape.mds'
    with open(paths[0], 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(UnsafePathError):
        merge_index(root)


def test_remote_partitions_local_copies_and_upload(tmp_path: Any) -> None:
    root, remote = str(tmp_path / 'local'), str(tmp_path / 'remote')
    write_all(root, remote=f'file://{remote}')
    assert not any(os.path.exists(os.path.join(root, p)) for p in PARTITIONS)  # uploaded, so removed locally
    url = merge_index([(os.path.join(root, p, 'index.json'), f'file://{remote}/{p}/index.json') for p in PARTITIONS],
                      (root, f'file://{remote}'), keep_local=False)
    assert url == f'file://{remote}/index.json'
    assert read_merged(remote) == expected(PARTITIONS)
    assert not os.path.exists(os.path.join(root, 'index.json'))


def test_remote_root_through_a_storage_plugin(dirfs: dict[str, Any], tmp_path: Any) -> None:  # noqa: F811
    local = str(tmp_path / 'local')
    write_all(local, remote='dirfs://ds')
    shutil.rmtree(local, ignore_errors=True)
    assert merge_index('dirfs://ds') == 'dirfs://ds/index.json'
    assert read_merged(os.path.join(dirfs['root'], 'ds')) == expected(['0', '1', '10', '2'])


def test_keep_local_false_removes_only_files_with_a_remote_copy(dirfs: dict[str, Any], tmp_path: Any,  # noqa: F811
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Local files with a remote copy of the same size are removed after the upload. The remote is listed twice:
    to find the partitions, and to check the merged index's files before the upload, which also decides what is
    removed."""
    from tests.test_writer_upload import DirBackend
    listings = []
    real_list = DirBackend.list
    monkeypatch.setattr(DirBackend, 'list', lambda self, url, **kw: listings.append(url) or real_list(self, url, **kw))
    local = str(tmp_path / 'local')
    for k, name in enumerate(PARTITIONS):
        write_partition(((os.path.join(local, name), f'dirfs://ds/{name}'), name, 100 * k, True))
    assert os.listdir(os.path.join(local, '0'))  # kept locally by the partition writer
    os.makedirs(os.path.join(local, 'notes'))
    (tmp_path / 'local' / 'notes' / 'mine.txt').write_text('only copy')
    listings.clear()
    merge_index((local, 'dirfs://ds'), keep_local=False)
    assert listings == ['dirfs://ds/', 'dirfs://ds/']
    assert os.path.exists(os.path.join(local, 'notes', 'mine.txt'))
    assert not os.path.exists(os.path.join(local, 'index.json'))
    assert not any(os.path.exists(os.path.join(local, name)) for name in PARTITIONS)  # uploaded: removed
    names = [s['raw_data']['basename'].split('/')[0] for s in
             json.loads(open(os.path.join(dirfs['root'], 'ds', 'index.json')).read())['shards']]
    assert sorted(set(names)) == ['0', '1', '10', '2']


def test_a_partition_written_only_locally_is_refused_not_dropped(dirfs: dict[str, Any], tmp_path: Any) -> None:  # noqa: F811
    """A local and remote root where one partition has its index.json only locally (written without its remote, or
    its upload failed): the merge used the remote's partitions alone, and the merged dataset, local and remote, lacked
    that partition's samples with no word. It is refused, naming it; nothing is uploaded or deleted."""
    local = str(tmp_path / 'local')
    for k, name in enumerate(['0', '1']):
        write_partition(((os.path.join(local, name), f'dirfs://ds/{name}'), name, 100 * k, True))
    write_partition((os.path.join(local, '2'), '2', 200))  # never uploaded
    with pytest.raises(IndexFormatError, match=r"partition\(s\) \['2'\] of .*local have an index.json locally but "
                                               r'not on dirfs://ds'):
        merge_index((local, 'dirfs://ds'), keep_local=False)
    assert not os.path.exists(os.path.join(dirfs['root'], 'ds', 'index.json'))
    assert not os.path.exists(os.path.join(local, 'index.json'))
    assert all(os.path.exists(os.path.join(local, name, 'index.json')) for name in ('0', '1', '2'))


@pytest.mark.parametrize('where', ['local', 'remote'])
def test_a_partition_one_level_too_deep_is_refused_not_dropped(dirfs: dict[str, Any], tmp_path: Any,  # noqa: F811
                                                               where: str) -> None:
    """``out/0`` and ``out/1/sub`` (a partition one level deeper, as ``partitionBy`` layouts are): the root merge
    took ``0`` alone and the merged dataset lacked ``1/sub``'s samples with no word. It is refused, naming ``1``."""
    if where == 'local':
        root = str(tmp_path / 'out')
        write_partition((os.path.join(root, '0'), '0', 0))
        write_partition((os.path.join(root, '1', 'sub'), 'sub', 100))
        target, shown = root, r'.*/out'
    else:
        write_partition(((str(tmp_path / 'staging-0'), 'dirfs://ds/0'), '0', 0))
        write_partition(((str(tmp_path / 'staging-1'), 'dirfs://ds/1/sub'), 'sub', 100))
        target, shown = 'dirfs://ds', 'dirfs://ds'
    with pytest.raises(IndexFormatError, match=rf"partition\(s\) \['1'\] of {shown} hold shard files \(or a "
                                               r'partition index.json in a subdirectory\) but no index.json of their '
                                               r'own.*one level too deep'):
        merge_index(target)


def test_keep_local_false_keeps_a_file_whose_remote_namesake_differs(dirfs: dict[str, Any],  # noqa: F811
                                                                     tmp_path: Any) -> None:
    """A partition merged into a remote that holds an older version of one of its files (of another size): the
    merged index would name a file readers cannot use, so it is not uploaded (the merge says which file), and no
    local file is deleted: the local one is the only copy of its data."""
    from streaming_core.errors import UploadError
    local = str(tmp_path / 'local')
    write_partition(((os.path.join(local, '0'), 'dirfs://ds/0'), '0', 0, True))
    stale = os.path.join(dirfs['root'], 'ds', '0', 'shard.00000.mds.zstd')
    with open(stale, 'wb') as handle:
        handle.write(b'an older version')
    with pytest.raises(UploadError, match=r'holds them with other sizes \(for example 0/shard\.00000\.mds\.zstd\)'):
        merge_index((local, 'dirfs://ds'), keep_local=False)
    assert not os.path.exists(os.path.join(dirfs['root'], 'ds', 'index.json'))
    assert os.path.exists(os.path.join(local, '0', 'shard.00000.mds.zstd'))
    assert os.path.exists(os.path.join(local, '0', 'shard.00001.mds.zstd'))


def test_partitions_written_only_locally_are_not_merged_into_a_remote(dirfs: dict[str, Any],  # noqa: F811
                                                                       tmp_path: Any) -> None:
    """Local partitions merged with a remote ``out``: only the merged index was uploaded, naming shards the remote
    does not hold, so every reader failed; the merge is refused before it uploads anything."""
    from streaming_core.errors import UploadError
    local = str(tmp_path / 'local')
    write_all(local)
    with pytest.raises(UploadError, match=r'dirfs://ds lacks \d+ file\(s\) the merged index names'):
        merge_index((local, 'dirfs://ds'))
    assert not os.path.exists(os.path.join(dirfs['root'], 'ds', 'index.json'))


def test_remote_equal_to_local_deletes_nothing(tmp_path: Any) -> None:
    root = str(tmp_path / 'out')
    write_all(root)
    merge_index((root, f'file://{root}'), keep_local=False)
    assert read_merged(root) == expected(['0', '1', '10', '2'])


def test_partitions_the_merged_index_would_misname_are_refused(tmp_path: Any, monkeypatch: Any) -> None:
    """Two partitions in directories of one name (``x/0`` and ``y/0``) would both be named ``0/...``: one read twice,
    the other lost. A partition that is not directly under a local-only output could never be read. Both are refused
    before anything is written; ``index.json`` given from inside a partition, or with a ``./`` segment, names its
    real directory."""
    write_partition((str(tmp_path / 'x' / '0'), 'x0', 0))
    write_partition((str(tmp_path / 'y' / '0'), 'y0', 100))
    with pytest.raises(ValueError, match=r"x/0/index.json and .*y/0/index.json are both in a directory named '0'"):
        merge_index([str(tmp_path / 'x' / '0' / 'index.json'), str(tmp_path / 'y' / '0' / 'index.json')],
                    str(tmp_path / 'x'))
    assert not (tmp_path / 'x' / 'index.json').exists()
    with pytest.raises(ValueError, match=r'y/0/index.json is not a direct subdirectory of .*/x'):
        merge_index([str(tmp_path / 'y' / '0' / 'index.json')], str(tmp_path / 'x'))
    root = str(tmp_path / 'out')
    write_all(root)
    monkeypatch.chdir(os.path.join(root, '0'))
    merge_index(['index.json', '../1/./index.json'], '..')
    assert read_merged(root) == expected(['0', '1'])


def test_a_partition_without_its_index_is_refused_not_dropped(dirfs: dict[str, Any], tmp_path: Any) -> None:  # noqa: F811
    """A partition whose writer failed before its index.json (its shards uploaded) was left out of the merge with no
    word, and readers saw 75 of 100 samples; such a partition is refused now, naming it (local and remote roots)."""
    local = str(tmp_path / 'local')
    write_all(local, remote='dirfs://ds')
    os.remove(os.path.join(dirfs['root'], 'ds', '10', 'index.json'))
    with pytest.raises(IndexFormatError, match=r"partition\(s\) \['10'\] of dirfs://ds hold shard files .*but no "
                                               r'index.json'):
        merge_index('dirfs://ds')
    only_local = str(tmp_path / 'only-local')
    write_all(only_local)
    os.remove(os.path.join(only_local, '1', 'index.json'))
    with pytest.raises(IndexFormatError, match=r"\['1'\]"):
        merge_index(only_local)


def test_a_dataset_s_own_index_at_the_output_is_not_replaced(tmp_path: Any) -> None:
    """A dataset written to ``root`` and a split to ``root/val``: ``merge_index(root)`` would replace the root
    dataset's index by the split's, leaving its samples unindexed with no error. It is refused, naming the index,
    and the dataset still reads; an earlier merge's index is replaced as before (tested above)."""
    from streaming_core import LocalDataset
    from streaming_core.cli import main
    root = str(tmp_path / 'root')
    write_partition((root, 'root', 0))
    write_partition((os.path.join(root, 'val'), 'val', 500))
    before = [int(LocalDataset(root)[i]['id']) for i in range(len(LocalDataset(root)))]
    with pytest.raises(FileExistsError, match=r'index of a dataset stored there \(shard\.00000\.mds is beside'):
        merge_index(root)
    assert main(['merge-index', root]) != 0  # the command says the same
    assert [int(LocalDataset(root)[i]['id']) for i in range(len(LocalDataset(root)))] == before


def test_a_remote_dataset_s_own_index_is_not_replaced(dirfs: dict[str, Any], tmp_path: Any) -> None:  # noqa: F811
    """The same for a remote output: the remote's ``index.json`` is read before anything is uploaded."""
    write_partition(((str(tmp_path / 'root'), 'dirfs://ds'), 'root', 0, True))
    write_partition(((str(tmp_path / 'val'), 'dirfs://ds/val'), 'val', 500, True))
    remote_index = os.path.join(dirfs['root'], 'ds', 'index.json')
    before = open(remote_index).read()
    with pytest.raises(FileExistsError, match=r'dirfs://ds/index.json is the index of a dataset stored there'):
        merge_index('dirfs://ds')
    assert open(remote_index).read() == before
