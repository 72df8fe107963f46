"""litdata directories open directly in ``StreamingDataset`` (their ``index.json`` claimed by the litdata index
builder): every item as litdata 0.2.76 reads it (golden datasets), locally and over moto S3 with a shuffle and two
DataLoader workers, exact mid-epoch resumption, the derived index rebuilt (and stale copies removed) when the
remote's ``index.json`` changes, and clear errors for a foreign index no builder reads."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import textwrap
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataLoader, StreamingDataset
from streaming_core.reading.derived_index import DerivedIndexError, ForeignIndexError
from tests.fixtures.s3 import moto_bucket
from tests.fixtures.servers import RunningServer

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'golden')
if GOLDEN not in sys.path:
    sys.path.insert(0, GOLDEN)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _expected(name: str) -> list[Any]:
    with open(os.path.join(GOLDEN, f'{name}-expected.pkl'), 'rb') as handle:
        return pickle.load(handle)


def _copy(tmp_path: Any, name: str, dest: str | None = None) -> str:
    out = str(tmp_path / (dest or name))
    shutil.copytree(os.path.join(GOLDEN, name), out)
    return out


@pytest.mark.parametrize('name', ['mixed', 'rows', 'arrow', 'mixed-zstd'])
def test_a_litdata_directory_reads_every_item_as_litdata_does(tmp_path: Any, name: str) -> None:
    from make_golden import canonical
    data = _copy(tmp_path, name)
    before = sorted(os.listdir(data))
    dataset = StreamingDataset(local=data, batch_size=4)
    expected = _expected(name)
    assert len(dataset) == len(expected) == 40
    assert dataset.streams[0].index_identity.startswith('derived:litdata:')
    for i, item in enumerate(dataset):
        assert canonical(item) == expected[i], f'{name} item {i}'
    assert canonical(dataset[23]) == expected[23]
    assert sorted(os.listdir(data)) == before  # the derived index lives in the state directory, not here


@pytest.mark.parametrize('name', ['mixed', 'mixed-zstd-chunk'])
def test_a_remote_rewritten_with_the_same_index_bytes_is_read_anew(tmp_path: Any, name: str) -> None:
    """litdata records no hashes, so fixed-size data rewritten gives the same index.json bytes: the remote's stat
    names the new version, and the old local copies (a whole-chunk zstd copy's sizes too) are not served."""
    import zstandard
    from make_golden import canonical
    remote, local = _copy(tmp_path, name, 'remote'), str(tmp_path / 'local')
    first = [canonical(item) for item in StreamingDataset(remote=remote, local=local, batch_size=4)]
    chunk = os.path.join(remote, sorted(n for n in os.listdir(remote) if n.startswith('chunk-0-1'))[0])
    with open(chunk, 'rb') as handle:
        data = handle.read()
    zipped = chunk.endswith('.zstd.bin')
    raw = bytearray(zstandard.ZstdDecompressor().decompress(data) if zipped else data)
    at = bytes(raw).rfind(b'item')
    raw[at:at + 4] = b'ITEM'  # the same length: the index does not change
    with open(chunk, 'wb') as handle:
        handle.write(zstandard.ZstdCompressor(level=19).compress(bytes(raw)) if zipped else bytes(raw))
    index = os.path.join(remote, 'index.json')
    with open(index, 'rb') as handle:
        text = handle.read()
    os.remove(index)
    with open(index, 'wb') as handle:  # written again, the same bytes
        handle.write(text)
    truth = [canonical(item) for item in StreamingDataset(local=shutil.copytree(remote, str(tmp_path / 'truth')),
                                                           batch_size=4)]
    assert truth != first
    again = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert [canonical(item) for item in again] == truth


def test_shuffled_resumption_mid_epoch_is_exact(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'rows')
    args = dict(local=data, batch_size=4, shuffle=True, num_canonical_nodes=2, shuffle_block_size=16)
    full = [s['id'] for s in StreamingDataset(**args)]
    assert sorted(full) == list(range(40)) and full != list(range(40))
    dataset = StreamingDataset(**args)
    seen = []
    for item in dataset:
        if len(seen) == 13:
            break
        seen.append(item['id'])
    resumed = StreamingDataset(**args)
    resumed.load_state_dict(dataset.state_dict(13, True))
    assert seen + [s['id'] for s in resumed] == full


def test_format_litdata_is_accepted_and_another_format_refuses_it(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'rows')
    assert len(StreamingDataset(streams=[Stream(local=data, format='litdata')], batch_size=1)) == 40
    with pytest.raises(ForeignIndexError, match=r"index\.json is not a streaming index .*'parquet' index builder"):
        StreamingDataset(streams=[Stream(local=data, format='parquet')], batch_size=1)


def test_a_changed_remote_index_rebuilds_and_drops_stale_copies(tmp_path: Any) -> None:
    from make_golden import canonical
    remote, local = _copy(tmp_path, 'rows', 'remote'), str(tmp_path / 'local')
    first = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert [s['id'] for s in first] == list(range(40))
    assert os.path.exists(os.path.join(local, 'chunk-0-0.bin'))
    with open(os.path.join(local, 'index.json'), 'rb') as mine, open(os.path.join(remote, 'index.json'), 'rb') as src:
        assert mine.read() == src.read()  # a copy of the remote's index, like ours
    again = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert again.streams[0].index_identity == first.streams[0].index_identity
    assert os.path.exists(os.path.join(local, 'chunk-0-0.bin'))  # unchanged: the copies are kept
    shutil.rmtree(remote)
    shutil.copytree(os.path.join(GOLDEN, 'mixed'), remote)  # the same chunk names, other contents
    changed = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert changed.streams[0].index_identity != first.streams[0].index_identity
    assert not os.path.exists(os.path.join(local, 'chunk-0-0.bin'))  # removed before the new index was used
    expected = _expected('mixed')
    assert [canonical(item) for item in changed] == expected


def test_an_index_json_no_builder_reads_is_named(tmp_path: Any) -> None:
    data = str(tmp_path / 'other')
    os.makedirs(data)
    with open(os.path.join(data, 'index.json'), 'w') as handle:
        json.dump({'files': ['a.bin'], 'kind': 'something else'}, handle)
    with pytest.raises(ForeignIndexError, match=r'other/index\.json is not a streaming index: it has no "shards" '
                                                r"list \(its top-level keys: 'files', 'kind'\)"):
        StreamingDataset(local=data, batch_size=1)


def test_without_the_plugin_the_error_names_it(tmp_path: Any) -> None:
    data = _copy(tmp_path, 'rows')
    script = textwrap.dedent(f'''
        from streaming_core import StreamingDataset
        try:
            StreamingDataset(local={data!r}, batch_size=1)
        except Exception as err:
            print(type(err).__name__, '|', err)
    ''')
    env = dict(os.environ, STREAMING_CORE_BLOCK_PLUGINS='litdata')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('ForeignIndexError |'), out.stdout
    assert f'{data}/index.json is not a streaming index' in out.stdout
    assert "It is a litdata index: install the distribution 'streaming-litdata'" in out.stdout
    assert 'pip install streaming-litdata' in out.stdout


def _tar(path: str, count: int) -> None:
    with tarfile.open(path, 'w') as tar:
        for i in range(count):
            payload = json.dumps({'id': i}).encode()
            info = tarfile.TarInfo(f'{i:06d}.json')
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))


def test_nested_index_files_do_not_make_a_directory_litdata(tmp_path: Any) -> None:
    parent = str(tmp_path / 'parent')
    _copy(tmp_path, 'rows', 'parent/train')
    _copy(tmp_path, 'arrow', 'parent/val')
    with pytest.raises(DerivedIndexError, match=r"no index.json, but its subdirectories \['train', 'val'\] have one"):
        StreamingDataset(local=parent, batch_size=1)
    _tar(os.path.join(parent, 'shard-0.tar'), 5)  # tars beside nested datasets: the tars are the dataset
    dataset = StreamingDataset(local=parent, batch_size=1)
    assert [s['json']['id'] for s in dataset] == list(range(5))


# S3 (moto on loopback): litdata's index.json on the remote, chunks downloaded as shards.
BUCKET = 'streaming-litdata'


@pytest.fixture
def s3_env(moto_server: RunningServer, cloud_env: pytest.MonkeyPatch) -> Any:
    yield from moto_bucket(moto_server, cloud_env, BUCKET)


@pytest.mark.slow
def test_over_s3_shuffled_with_two_workers_and_resumed(tmp_path: Any, s3_env: Any) -> None:
    import uuid

    from make_golden import canonical
    prefix = f'ds-{uuid.uuid4().hex}'
    source = os.path.join(GOLDEN, 'mixed')
    for name in sorted(os.listdir(source)):
        s3_env.upload_file(os.path.join(source, name), BUCKET, f'{prefix}/{name}')
    remote = f's3://{BUCKET}/{prefix}'
    expected = _expected('mixed')
    args = dict(remote=remote, local=str(tmp_path / 'cache'), batch_size=4, shuffle=True, shuffle_block_size=16)
    dataset = StreamingDataset(**args)
    assert len(dataset) == 40
    loader = StreamingDataLoader(dataset, batch_size=4, num_workers=2, collate_fn=lambda batch: batch)
    seen = [item for batch in loader for item in batch]
    assert sorted(item['id'] for item in seen) == list(range(40))
    assert [item['id'] for item in seen] != list(range(40))
    for item in seen:
        assert canonical(item) == expected[item['id']], f'item {item["id"]}'
    full = [item['id'] for item in StreamingDataset(**args)]
    partial = StreamingDataset(**args)
    head = []
    for item in partial:
        if len(head) == 17:
            break
        head.append(item['id'])
    resumed = StreamingDataset(**{**args, 'local': str(tmp_path / 'cache2')})
    resumed.load_state_dict(partial.state_dict(17, True))
    assert head + [item['id'] for item in resumed] == full


def test_tools_build_the_same_index_from_litdatas_index_json() -> None:
    from streaming_core.reading.foreign_index import build_foreign_index, foreign_index
    from streaming_litdata import convert_index
    root = os.path.join(GOLDEN, 'mixed')
    with open(os.path.join(root, 'index.json'), 'rb') as handle:
        data = handle.read()
    obj = foreign_index(data)
    assert obj is not None and foreign_index(b'{"shards": [], "version": 2}') is None and foreign_index(b'{') is None
    index = build_foreign_index(root, data, obj)
    assert index == convert_index(data, 'mixed')
    assert [entry['samples'] for entry in index['shards']] == [16, 16, 8]


def test_an_unreachable_remote_falls_back_on_the_local_copy_of_its_index(tmp_path: Any) -> None:
    remote, local = _copy(tmp_path, 'rows', 'remote'), str(tmp_path / 'local')
    first = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert [s['id'] for s in first] == list(range(40))
    shutil.rmtree(remote)
    with pytest.warns(UserWarning, match=r'Cannot read the remote index .*using the local copy'):
        offline = StreamingDataset(remote=remote, local=local, batch_size=4)
    assert offline.streams[0].index_identity == first.streams[0].index_identity
    assert [s['id'] for s in offline] == list(range(40))


def test_inspect_and_verify_a_litdata_directory(tmp_path: Any) -> None:
    """``streaming inspect`` / ``verify`` read a litdata directory through the index its builder derives."""
    data = _copy(tmp_path, 'rows')
    before = sorted(os.listdir(data))
    script = os.path.join(os.path.dirname(sys.executable), 'streaming')
    inspected = subprocess.run([script, 'inspect', data], capture_output=True, text=True, timeout=300)
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr
    assert 'litdata' in inspected.stdout and 'Samples:       40' in inspected.stdout
    verified = subprocess.run([script, 'verify', data], capture_output=True, text=True, timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert sorted(os.listdir(data)) == before
