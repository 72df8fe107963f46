"""Data compatibility against datasets written by mosaicml-streaming 0.13 (the golden datasets).

``tests/fixtures/golden/<name>/`` were written by the reference itself (``compat/make_golden.py``, run in the
reference virtualenv); ``manifest.json`` holds, per dataset, the writer, its keyword arguments, the inputs and the
exact decoded value of every sample (:mod:`compat.tagged` forms). These tests need no reference installation:

* our shard readers (``load_index`` + ``shard_readers``) decode every sample exactly as the reference did, and the
  decompressed raw files have the sizes and hashes the reference recorded;
* our ``StreamingDataset`` yields the same samples, by iteration and by random access;
* our writers, given the same inputs and keyword arguments, write byte-identical uncompressed files (compressed
  files decompress to identical bytes) and an identical ``index.json`` apart from compressed sizes and hashes.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
from typing import Any

import pytest

from compat import tagged

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'golden')
with open(os.path.join(GOLDEN, 'manifest.json')) as _handle:
    MANIFEST = json.load(_handle)
DATASETS = {d['name']: d for d in MANIFEST['datasets']}
NAMES = sorted(DATASETS)

WRITER_MODULES = {'MDSWriter': 'streaming_mds', 'JSONWriter': 'streaming_jsonl', 'CSVWriter': 'streaming_csv',
                  'TSVWriter': 'streaming_csv', 'XSVWriter': 'streaming_csv'}
#: The 28 MDS encoding names of the reference (formats.md 4.1); the golden datasets use every one.
MDS_ENCODINGS = {'bytes', 'str', 'int', 'ndarray', 'uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32',
                 'int64', 'float16', 'float32', 'float64', 'str_int', 'str_float', 'str_decimal', 'pil', 'jpeg',
                 'jpeg_array', 'jpegarray', 'png', 'list[pil]', 'list[jpeg]', 'list[png]', 'pkl', 'json'}
#: Encodings whose bytes come from Pillow's codecs (byte identity is only promised with the same Pillow).
PIXEL_CODECS = ('jpeg', 'png', 'list[jpeg]', 'list[png]')


def _require(module: str) -> Any:
    from tests.deps import require
    require(module)
    return importlib.import_module(module)


def _compare(actual: list[Any], expected: list[Any], what: str) -> None:
    encoded = [tagged.encode(sample) for sample in actual]
    assert len(encoded) == len(expected), f'{what}: {len(encoded)} samples, expected {len(expected)}'
    for i, (got, want) in enumerate(zip(encoded, expected, strict=True)):
        if tagged.canonical(got) != tagged.canonical(want):
            diff = tagged.first_difference(got, want)
            raise AssertionError(f'{what}: sample {i} differs from the reference at {diff}')


def _index(root: str) -> dict[str, Any]:
    with open(os.path.join(root, 'index.json')) as handle:
        return json.load(handle)


def _zip_basenames(index: dict[str, Any]) -> set[str]:
    return {entry[key]['basename'] for entry in index['shards'] for key in ('zip_data', 'zip_meta')
            if entry.get(key)}


# ----------------------------------------------------------------------------------------------------------------
# The fixtures themselves


def test_manifest_lists_every_golden_file() -> None:
    total = 0
    for name, entry in DATASETS.items():
        on_disk = []
        for dirpath, _, files in os.walk(os.path.join(GOLDEN, name)):
            for file in files:
                path = os.path.join(dirpath, file)
                on_disk.append([os.path.relpath(path, os.path.join(GOLDEN, name)).replace(os.sep, '/'),
                                os.path.getsize(path)])
                total += os.path.getsize(path)
        assert sorted(on_disk) == entry['files'], f'{name}: golden files changed; rerun compat/make_golden.py'
    assert total + os.path.getsize(os.path.join(GOLDEN, 'manifest.json')) < 2 * 1024 * 1024
    covered = {enc.partition(':')[0] for d in MANIFEST['datasets']
               for shard in _index(os.path.join(GOLDEN, d['name']))['shards']
               for enc in shard.get('column_encodings', []) if shard['format'] == 'mds'}
    assert covered == MDS_ENCODINGS
    assert {shard['format'] for d in MANIFEST['datasets']
            for shard in _index(os.path.join(GOLDEN, d['name']))['shards']} == {'mds', 'json', 'csv', 'tsv', 'xsv'}


# ----------------------------------------------------------------------------------------------------------------
# Our shard readers


def _raw_paths(reader: Any, root: str, scratch: str) -> list[str]:
    """Local raw paths of a reader's parts; zip-only parts are decompressed into ``scratch`` first."""
    from streaming_core.storage.compression import decompress
    from streaming_core.storage.hashing import hash_file_data
    paths = []
    for raw, zipped in reader.parts:
        path = os.path.join(root, *raw.basename.split('/'))
        if not os.path.exists(path):
            assert zipped is not None, f'{raw.basename}: neither the raw nor a compressed file exists'
            with open(os.path.join(root, *zipped.basename.split('/')), 'rb') as handle:
                data = decompress(reader.compression, handle.read())
            path = os.path.join(scratch, *raw.basename.split('/'))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'wb') as handle:
                handle.write(data)
        with open(path, 'rb') as handle:
            data = handle.read()
        assert len(data) == raw.bytes, f'{raw.basename}: {len(data)} bytes, the index says {raw.bytes}'
        assert hash_file_data(sorted(raw.hashes), data) == dict(raw.hashes), f'{raw.basename}: hash mismatch'
        paths.append(path)
    return paths


@pytest.mark.parametrize('name', NAMES)
def test_our_readers_decode_reference_shards(name: str, tmp_path: Any) -> None:
    from streaming_core.reading.index_file import load_index, shard_readers
    root = os.path.join(GOLDEN, name)
    index_path = os.path.join(root, 'index.json')
    index = load_index(index_path)
    readers = shard_readers(index, index_path, allow_unsafe_types=True)
    assert [r.samples for r in readers] == [s['samples'] for s in index['shards']]
    samples = []
    for reader in readers:
        view = reader.open(_raw_paths(reader, root, str(tmp_path)))
        try:
            assert len(view) == reader.samples
            samples.extend(view[i] for i in range(reader.samples))
        finally:
            close = getattr(view, 'close', None)
            if close is not None:
                close()
    _compare(samples, DATASETS[name]['expected'], f'{name} (shard readers)')


def test_pkl_columns_refused_without_allow_unsafe_types() -> None:
    from streaming_core.reading.index_file import load_index, shard_readers
    index_path = os.path.join(GOLDEN, 'mds_objects', 'index.json')
    with pytest.raises(Exception, match='pkl'):
        shard_readers(load_index(index_path), index_path)


# ----------------------------------------------------------------------------------------------------------------
# Our StreamingDataset


@pytest.mark.parametrize('name', NAMES)
def test_streaming_dataset_reads_reference_dataset(name: str, tmp_path: Any) -> None:
    from streaming_core import StreamingDataset
    local = str(tmp_path / 'local')
    shutil.copytree(os.path.join(GOLDEN, name), local)
    expected = DATASETS[name]['expected']
    dataset = StreamingDataset(local=local, batch_size=1, allow_unsafe_types=True)
    assert dataset.size == len(expected)
    _compare(list(dataset), expected, f'{name} (StreamingDataset iteration)')
    _compare([dataset[i] for i in range(len(expected))], expected, f'{name} (StreamingDataset random access)')


# ----------------------------------------------------------------------------------------------------------------
# Our writers


def _write(writer: str, kwargs: dict[str, Any], inputs: list[Any], out: str) -> None:
    cls = getattr(_require(WRITER_MODULES[writer]), writer)
    with cls(out=out, **kwargs) as handle:
        for sample in tagged.decode(inputs):
            handle.write(sample)


def _normalised_index_text(index: dict[str, Any]) -> str:
    """The index text with compressed sizes and hashes blanked (they may differ with the codec library)."""
    for entry in index['shards']:
        for key in ('zip_data', 'zip_meta'):
            if entry.get(key):
                entry[key]['bytes'] = 0
                entry[key]['hashes'] = {algo: '' for algo in entry[key]['hashes']}
    return json.dumps(index)


def _uses_pixel_codecs(entry: dict[str, Any]) -> bool:
    kwargs_list = [p['kwargs'] for p in entry.get('partitions', [])] or [entry['kwargs']]
    return any(enc in PIXEL_CODECS for kw in kwargs_list for enc in kw['columns'].values())


@pytest.mark.parametrize('name', NAMES)
def test_our_writers_match_reference_bytes(name: str, tmp_path: Any) -> None:
    entry = DATASETS[name]
    if _uses_pixel_codecs(entry):
        import PIL
        if PIL.__version__ != MANIFEST['reference']['pillow']:
            pytest.skip(f'JPEG/PNG bytes come from Pillow: golden data used {MANIFEST["reference"]["pillow"]}, '
                        f'here {PIL.__version__}')
    out = str(tmp_path / name)
    if entry['writer'] == 'merge_index':
        os.makedirs(out)
        for part in entry['partitions']:
            _write(part['writer'], part['kwargs'], part['inputs'], os.path.join(out, part['dir']))
        from streaming_core.writing.merge import merge_index
        merge_index(out, keep_local=True)
    else:
        _write(entry['writer'], entry['kwargs'], entry['inputs'], out)
    golden = os.path.join(GOLDEN, name)
    ours_files = []
    for dirpath, _, files in os.walk(out):
        ours_files.extend(os.path.relpath(os.path.join(dirpath, f), out).replace(os.sep, '/') for f in files)
    assert sorted(ours_files) == [path for path, _ in entry['files']], f'{name}: different files written'
    from streaming_core.storage.compression import decompress
    zips = _zip_basenames(_index(golden))
    for path, _ in entry['files']:
        if path == 'index.json' or path.endswith('/index.json'):
            _assert_same_index(os.path.join(golden, path), os.path.join(out, path), f'{name}: {path}')
            continue
        with open(os.path.join(golden, path), 'rb') as a, open(os.path.join(out, path), 'rb') as b:
            theirs, ours = a.read(), b.read()
        if path in zips:
            family = path.rsplit('.', 1)[1]
            theirs, ours = decompress(family, theirs), decompress(family, ours)
        assert ours == theirs, f'{name}: {path} differs from the reference ({len(ours)} vs {len(theirs)} bytes)'


def _assert_same_index(golden_path: str, our_path: str, what: str) -> None:
    """Identical text, except compressed sizes and hashes (normalised when the index names compressed files)."""
    with open(golden_path, 'rb') as a, open(our_path, 'rb') as b:
        theirs, ours = a.read(), b.read()
    golden_index = json.loads(theirs)
    if not _zip_basenames(golden_index):
        assert ours == theirs, f'{what} differs from the reference'
    else:
        assert _normalised_index_text(json.loads(ours)) == _normalised_index_text(golden_index), \
            f'{what} differs from the reference (compressed sizes and hashes ignored)'
