"""The binary, node-shared index: the same tables and samples as the JSON path, never trusted when damaged, built
once per node, rebuilt for a new index version, and small pickles (DataLoader workers, other machines)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from torch.utils.data import DataLoader

from streaming_core import LocalDataset, StreamingDataset
from streaming_core.common.paths import state_dir
from streaming_core.errors import IndexFormatError, UnsafePathError
from streaming_core.reading.binary_index import binary_path, open_binary
from streaming_core.reading.index_file import load_index, shard_readers
from tests.fixtures.data import ids_of, sample, write_mds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _big_index(path: str, num_shards: int, real: int = 4) -> str:
    """A dataset of ``num_shards`` 8-sample shards whose first ``real`` exist (the rest are index-only)."""
    write_mds(path, 8 * real, size_limit=600)  # 8 samples per shard
    index = load_index(os.path.join(path, 'index.json'))
    assert [entry['samples'] for entry in index['shards']] == [8] * real
    shards = []
    for i in range(num_shards):
        entry = json.loads(json.dumps(index['shards'][i % real]))
        if i >= real:
            entry['raw_data']['basename'] = f'shard.{i:07}.mds'
        shards.append(entry)
    with open(os.path.join(path, 'index.json'), 'w') as handle:
        json.dump({'shards': shards, 'version': 2}, handle)
    return path


def _bin_files(local: str) -> list[str]:
    sdir = state_dir(local)
    return sorted(name for name in os.listdir(sdir) if name.endswith('.bin'))


def _run(code: str, timeout: float = 240) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('compression,hashes', [(None, None), ('zstd', ['sha1', 'xxh64'])])
def test_every_table_entry_and_sample_equals_the_json_path(tmp_path, compression, hashes):
    local = write_mds(str(tmp_path / 'ds'), 90, size_limit=300, compression=compression, hashes=hashes)
    index = load_index(os.path.join(local, 'index.json'))
    expected = shard_readers(index, os.path.join(local, 'index.json'))
    dataset = StreamingDataset(local=local, batch_size=1)
    table = dataset.catalogue.sources[0]
    assert table.created == 1  # one reader per template (validation), nothing per shard
    assert len(table) == len(expected) == dataset.num_shards
    for i, entry in enumerate(index['shards']):
        assert table.entry(i) == entry
    assert dataset.samples_per_shard.tolist() == [r.samples for r in expected]
    assert table.max_size_per_shard.tolist() == [r.max_size for r in expected]
    assert dataset.catalogue.max_size_per_shard.tolist() == [r.max_size for r in expected]
    assert dataset.sample_offset_per_shard.tolist() == np.concatenate(
        [[0], np.cumsum([r.samples for r in expected])[:-1]]).tolist()
    for i, reader in enumerate(expected):
        lazy = dataset.shards[i]
        assert (type(lazy), lazy.samples, lazy.parts, lazy.compression, lazy.where) == \
            (type(reader), reader.samples, reader.parts, reader.compression, reader.where)
    assert [dataset[i] for i in range(90)] == [sample(i) for i in range(90)]
    assert ids_of(dataset) == list(range(90))
    assert dataset.size == 90 and len(dataset) == 90


def test_two_templates_and_split_subdirectories(tmp_path):
    root = tmp_path / 'ds'
    write_mds(str(root / 'a'), 20, size_limit=300)
    write_mds(str(root / 'b'), 20, start=20, size_limit=300, compression='zstd')
    shards = []
    for sub in ('a', 'b'):
        for entry in load_index(str(root / sub / 'index.json'))['shards']:
            for key in ('raw_data', 'zip_data'):
                if entry[key] is not None:
                    entry[key]['basename'] = f'{sub}/{entry[key]["basename"]}'
            shards.append(entry)
    (root / 'index.json').write_text(json.dumps({'shards': shards, 'version': 2}))
    dataset = StreamingDataset(local=str(root), batch_size=1)
    table = dataset.catalogue.sources[0]
    assert len(table.header['templates']) == 2 and table.created == 2
    assert [table.entry(i) for i in range(len(shards))] == shards
    assert ids_of(dataset) == list(range(40))
    local = LocalDataset(str(root))
    assert [local[i] for i in range(40)] == [sample(i) for i in range(40)]


def test_bad_entries_are_refused_naming_the_file_and_shard(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 30, size_limit=300)
    path = os.path.join(local, 'index.json')
    index = load_index(path)
    index['shards'][3]['raw_data']['basename'] = '../escape.mds'
    with open(path, 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(UnsafePathError, match=r'index\.json shard 3'):
        StreamingDataset(local=local, batch_size=1)
    index['shards'][3]['raw_data']['basename'] = 'shard.00003.mds'
    index['shards'][5]['samples'] = 10 ** 9  # more samples than its bytes can hold
    with open(path, 'w') as handle:
        json.dump(index, handle)
    with pytest.raises(IndexFormatError, match=r'shard 5.*cannot fit'):
        StreamingDataset(local=local, batch_size=1)
    # The first index was refused while building; the second's binary form exists but every load checks the
    # format's limits again, so a later construction refuses it the same way.
    assert len(_bin_files(local)) == 1
    with pytest.raises(IndexFormatError, match=r'shard 5.*cannot fit'):
        StreamingDataset(local=local, batch_size=1)


# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('damage', ['flip', 'truncate', 'empty'])
def test_a_corrupt_or_truncated_binary_index_is_rebuilt(tmp_path, damage):
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    first = StreamingDataset(local=local, batch_size=1)
    assert first.catalogue.sources[0].built_here
    (name,) = _bin_files(local)
    path = os.path.join(state_dir(local), name)
    data = bytearray(open(path, 'rb').read())
    if damage == 'flip':
        data[len(data) // 2] ^= 0x40
    elif damage == 'truncate':
        data = data[:len(data) - 24]
    else:
        data = bytearray()
    with open(path, 'wb') as handle:
        handle.write(data)
    again = StreamingDataset(local=local, batch_size=1)
    assert again.catalogue.sources[0].built_here
    assert [again[i] for i in range(40)] == [sample(i) for i in range(40)]
    third = StreamingDataset(local=local, batch_size=1)
    assert not third.catalogue.sources[0].built_here  # the rebuilt file is trusted


def test_a_builder_killed_before_the_rename_leaves_nothing_trusted(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    proc = subprocess.run([sys.executable, '-c', textwrap.dedent(f'''
        import os, signal
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # dies after writing, before the rename
        from streaming_core import StreamingDataset
        StreamingDataset(local={local!r}, batch_size=1)
    ''')], env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT, capture_output=True, timeout=240)
    assert proc.returncode == -9, proc.stderr
    assert _bin_files(local) == []
    assert [n for n in os.listdir(state_dir(local)) if n.endswith('.tmp')]  # the dead writer's partial file
    dataset = StreamingDataset(local=local, batch_size=1)
    assert dataset.catalogue.sources[0].built_here
    assert not [n for n in os.listdir(state_dir(local)) if n.endswith('.tmp')]  # cleared
    assert ids_of(dataset) == list(range(40))


def test_two_processes_building_at_once_build_once(tmp_path):
    local = _big_index(str(tmp_path / 'ds'), 40_000)
    start = time.time() + 3.0
    code = textwrap.dedent(f'''
        import time
        from streaming_core import StreamingDataset
        import streaming_mds  # imports done before the common start
        time.sleep(max(0.0, {start} - time.time()))
        ds = StreamingDataset(local={local!r}, batch_size=1)
        print(int(ds.catalogue.sources[0].built_here), ds.num_shards, ds[8 * 3 + 5]['id'])
    ''')
    env = dict(os.environ, PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT) for _ in range(2)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outs.append(out.split())
    assert sorted(o[0] for o in outs) == ['0', '1']
    assert all(o[1:] == ['40000', '29'] for o in outs)
    assert len(_bin_files(local)) == 1


def test_a_new_index_version_gets_its_own_binary_index(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 30, size_limit=300)
    old = StreamingDataset(local=local, batch_size=1)
    write_mds(local, 50, start=100, size_limit=300, exist_ok=True)
    new = StreamingDataset(local=local, batch_size=1)
    assert new.catalogue.sources[0].built_here
    assert new.streams[0].index_identity != old.streams[0].index_identity
    assert len(_bin_files(local)) == 2
    assert ids_of(new) == list(range(100, 150))
    assert old.num_samples == 30 and old.catalogue.sources[0].entry(0)['samples'] == \
        load_index(os.path.join(local, 'index.json'))['shards'][0]['samples']  # its own mapping stays usable


# ------------------------------------------------------------------------------------------------------------------
def test_pickles_small_at_ten_thousand_shards_and_rebuilds_where_absent(tmp_path):
    local = _big_index(str(tmp_path / 'ds'), 10_000)
    dataset = StreamingDataset(local=local, batch_size=4, shuffle=True)
    assert dataset.num_shards == 10_000 and dataset.size == 80_000
    assert dataset.catalogue.sources[0].created == 1
    blob = pickle.dumps(dataset)
    # Nothing per shard: the pickle of 10,000 shards is within 2 KB of a 4-shard dataset's (whose fixed part is
    # the epoch counters' shared page, SharedState, about 80 KB when pickled outside a process start).
    small = StreamingDataset(local=write_mds(str(tmp_path / 'small'), 32, size_limit=600), batch_size=4, shuffle=True)
    assert len(blob) - len(pickle.dumps(small)) < 2048, (len(blob), len(pickle.dumps(small)))
    assert len(pickle.dumps(dataset.catalogue)) < 4096
    assert len(blob) - len(pickle.dumps(dataset._state)) < 16 * 1024
    copy = pickle.loads(blob)
    assert copy.num_samples == 80_000 and copy.layout_identity == dataset.layout_identity
    assert copy[13] == dataset[13] == sample(13)
    # Another machine: no binary index there (a fresh cache root) -> rebuilt from the index, never a crash.
    blob_path = tmp_path / 'ds.pkl'
    blob_path.write_bytes(blob)
    out = _run(f'''
        import os, pickle
        os.environ['STREAMING_CORE_CACHE_DIR'] = {str(tmp_path / 'other-machine')!r}
        ds = pickle.loads(open({str(blob_path)!r}, 'rb').read())
        print(int(ds.catalogue.sources[0].built_here), ds.num_shards, ds[30]['id'])
    ''')
    assert out.split() == ['1', '10000', '30']


def test_an_unpickled_dataset_refuses_an_index_changed_meanwhile(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 30, size_limit=300)
    blob = pickle.dumps(StreamingDataset(local=local, batch_size=1))
    write_mds(local, 50, start=100, size_limit=300, exist_ok=True)
    for name in _bin_files(local):
        os.remove(os.path.join(state_dir(local), name))
    with pytest.raises(IndexFormatError, match=r'index\.json of Stream\(.*changed since this dataset was created'):
        pickle.loads(blob)


def test_an_unpickled_dataset_accepts_the_same_shards_under_another_identity(tmp_path):
    """Another machine's copy of the dataset (another inode and mtime): the same shards, so it is read."""
    local = write_mds(str(tmp_path / 'ds'), 30, size_limit=300)
    dataset = StreamingDataset(local=local, batch_size=1)
    blob = pickle.dumps(dataset)
    path = os.path.join(local, 'index.json')
    text = open(path, 'rb').read()
    os.remove(path)
    time.sleep(0.01)
    with open(path, 'wb') as handle:
        handle.write(text)
    for name in _bin_files(local):
        os.remove(os.path.join(state_dir(local), name))
    copy = pickle.loads(blob)
    assert copy.catalogue.sources[0].built_here
    assert copy.catalogue.sources[0].identity != dataset.streams[0].index_identity
    assert copy.layout_identity == dataset.layout_identity and copy[29] == sample(29)


@pytest.mark.parametrize('context', ['fork', 'spawn'])
def test_dataloader_workers_read_every_sample(tmp_path, context):
    local = write_mds(str(tmp_path / 'ds'), 120, size_limit=300, compression='zstd')
    dataset = StreamingDataset(local=local, batch_size=4, shuffle=True, shuffle_block_size=40)
    loader = DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=context)
    got = ids_of(loader)
    assert sorted(got) == list(range(120))
    assert sorted(ids_of(loader)) == list(range(120))  # a second epoch, same workers' tables
    assert dataset.catalogue.sources[0].created == 1  # the workers touched the shards, not the main process


def test_mapped_file_is_keyed_by_the_index_identity(tmp_path):
    local = write_mds(str(tmp_path / 'ds'), 20, size_limit=300)
    dataset = StreamingDataset(local=local, batch_size=1)
    identity = dataset.streams[0].index_identity
    path = binary_path(state_dir(local), identity)
    header, arrays, mapping = open_binary(path, identity)
    assert header['identity'] == identity and header['source'] == os.path.join(local, 'index.json')
    assert arrays['samples'].tolist() == dataset.samples_per_shard.tolist()
    with pytest.raises(Exception, match='built for index'):
        open_binary(path, identity + 'x')
    del arrays, mapping


def test_a_cache_limit_scans_the_cache_without_creating_every_reader(tmp_path):
    remote = write_mds(str(tmp_path / 'remote'), 200, size_limit=300, compression='zstd')
    dataset = StreamingDataset(remote=remote, local=str(tmp_path / 'cache'), batch_size=1, cache_limit='10mb')
    table = dataset.catalogue.sources[0]
    assert dataset.num_shards > 20 and table.created == 1
    assert dataset[57] == sample(57)  # the first preparation scans the node's cache (every shard's files)
    assert dataset.shard_manager.cache.usage > 0
    assert table.created == 2  # the template's check and the shard read
    assert ids_of(dataset) == list(range(200))


def test_the_checksum_is_verified_once_per_file_version_and_a_stale_record_is_never_trusted(tmp_path, monkeypatch):
    from streaming_core.reading import binary_index
    local = write_mds(str(tmp_path / 'ds'), 40, size_limit=300)
    assert StreamingDataset(local=local, batch_size=1).catalogue.sources[0].built_here
    (name,) = _bin_files(local)
    path = os.path.join(state_dir(local), name)
    record = binary_index.record_path(path)
    assert not os.path.exists(record), 'a file changed within the margin is not vouched for'
    calls = []
    real = binary_index._checksum
    monkeypatch.setattr(binary_index, '_checksum', lambda handle, length: calls.append(length) or real(handle, length))
    monkeypatch.setattr(binary_index, 'RECORD_MARGIN_NS', 0)
    StreamingDataset(local=local, batch_size=1)
    assert len(calls) == 1 and json.load(open(record))['stamp'][2] == os.path.getsize(path)
    again = StreamingDataset(local=local, batch_size=1)
    assert len(calls) == 1 and not again.catalogue.sources[0].built_here, 'the record spares the checksum'
    stat = os.stat(path)
    with open(path, 'r+b') as handle:  # flip a byte in place, same size, mtime put back: the ctime still moves
        handle.seek(stat.st_size // 2)
        byte = handle.read(1)
        handle.seek(stat.st_size // 2)
        handle.write(bytes([byte[0] ^ 0x40]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    time.sleep(0.02)
    damaged = StreamingDataset(local=local, batch_size=1)
    assert len(calls) > 1 and damaged.catalogue.sources[0].built_here, 'the record no longer matches: checked'
    assert [damaged[i] for i in range(40)] == [sample(i) for i in range(40)]
    with open(record, 'w') as handle:
        handle.write('{"stamp": [1, 2, 3], "checksum": 0')  # garbage: ignored, checked again, rewritten
    StreamingDataset(local=local, batch_size=1)
    assert json.load(open(record))['stamp'][2] == os.path.getsize(path)
    with open(path, 'r+b') as handle:  # truncated under a valid record: the size tells
        handle.truncate(os.path.getsize(path) - 24)
    assert StreamingDataset(local=local, batch_size=1).catalogue.sources[0].built_here


@pytest.mark.parametrize('length', [0, 1, 4095, (1 << 22) - 1, 1 << 22, (1 << 22) + 1, 3 * (1 << 22) + 17])
def test_the_checksum_covers_exactly_the_first_length_bytes_whatever_the_buffer(tmp_path, length):
    """The read buffer is sized to the file (a small binary index no longer zeroes 4 MB on every open): the
    checksum is still that of exactly ``length`` bytes, across buffer boundaries, and ignores what follows."""
    import xxhash

    from streaming_core.storage.verified_files import xxh3_checksum
    data = np.random.default_rng(length).integers(0, 256, length + 9, dtype=np.uint8).tobytes()
    path = tmp_path / 'f.bin'
    path.write_bytes(data)
    with open(path, 'rb') as handle:
        handle.read(5)  # wherever the handle stands, the checksum starts at byte 0
        assert xxh3_checksum(handle, length) == xxhash.xxh3_64_intdigest(data[:length])
