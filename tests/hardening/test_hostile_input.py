"""Hostile input is refused: mutated real shards and index files give only the library's own errors.

Every dataset is written by the project's writers, then mutated (bit flips, truncation, extension, offset-table
and header edits, ``index.json`` field edits and text damage) and read in ``workers/read_server.py``: a separate
process whose address space is capped (``RLIMIT_AS``), so an allocation sized by a hostile number fails there, a
crash of the interpreter is seen as the process dying, and a hang as a read that does not answer in
``READ_TIMEOUT`` seconds. The contract (:func:`~tests.hardening.harness.refused_properly`): every sample reads,
or a :class:`~streaming_core.errors.StreamingError` comes out that is not a disguised ``MemoryError``.

The fuzz tests are deterministic (``derandomize=True``) so the suite is stable; ``--soak`` runs many more random
examples. The bugs this matrix found have regression tests at the end of the module.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_core import StreamingDataset
from streaming_core.errors import (
    IndexFormatError,
    ShardCorruptError,
    StreamingError,
    UnsafePathError,
    UnsafeTypeError,
)
from tests.hardening.harness import ReadServer, describe, refused_properly
from tests.hardening.hostile import (
    KINDS,
    Mutation,
    copy_dataset,
    index_paths,
    load_index,
    mutate_file,
    save_index,
    set_path,
    shard_files,
    write_dataset,
)

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(max_examples=30, derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])
SOAK = settings(FUZZ, max_examples=1500, derandomize=False)
COMPRESSIONS = (None, 'zstd', 'gz')


# ----------------------------------------------------------------------------------------------------------------
# Fixtures: one capped reader and one set of pristine datasets per module.
@pytest.fixture(scope='module')
def reader() -> Any:
    server = ReadServer()
    yield server
    server.close()


@pytest.fixture(scope='module')
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str | None], str]:
    """``(kind, compression) -> directory`` of a small multi-shard dataset (sha1 and xxh64 hashes recorded)."""
    root = tmp_path_factory.mktemp('pristine')
    out = {}
    for kind, compression in itertools.product(KINDS, COMPRESSIONS):
        out[(kind, compression)] = write_dataset(str(root / f'{kind}-{compression}'), kind, compression=compression,
                                                 hashes=['sha1', 'xxh64'])
    return out


@pytest.fixture(scope='module')
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A fresh directory name per call (hypothesis examples cannot use function-scoped tmp_path)."""
    root = tmp_path_factory.mktemp('mutated')
    counter = itertools.count()
    return lambda: str(root / f'case{next(counter)}')


def test_pristine_datasets_read_completely(reader: ReadServer, pristine: dict, scratch: Any) -> None:
    for (kind, compression), source in pristine.items():
        result = reader.read(copy_dataset(source, scratch()))
        assert result['ok'] and result['samples'] == 24, (kind, compression, describe(result))


# ----------------------------------------------------------------------------------------------------------------
# The contract.
def check_contract(kind: str, result: dict[str, Any], what: str) -> None:
    """Fail on any contract violation."""
    if not refused_properly(result):
        raise AssertionError(f'{kind}: {what}: {describe(result)}')


# ----------------------------------------------------------------------------------------------------------------
# Fuzz: shard bytes.
MUTATIONS = st.one_of(
    st.builds(Mutation, st.just('flip'), st.integers(0, 1 << 16), st.integers(0, 7)),
    st.builds(Mutation, st.just('truncate'), st.integers(0, 1 << 16)),
    st.builds(Mutation, st.just('extend'), st.just(0), st.integers(1, 64), st.binary(max_size=64)),
    st.builds(Mutation, st.just('put_u32'), st.integers(0, 40),
              st.sampled_from([0, 1, 3, 8, 255, 1 << 16, (1 << 31) - 1, 1 << 31, (1 << 32) - 1])
              | st.integers(0, (1 << 32) - 1)),
    st.builds(Mutation, st.just('overwrite'), st.integers(0, 1 << 16), st.just(0), st.binary(min_size=1, max_size=16)),
)


def _fuzz_shard_bytes(reader: ReadServer, pristine: dict, scratch: Any, kind: str, compression: str | None,
                      data: st.DataObject) -> None:
    directory = copy_dataset(pristine[(kind, compression)], scratch())
    name = data.draw(st.sampled_from(shard_files(directory)), label='file')
    mutations = data.draw(st.lists(MUTATIONS, min_size=1, max_size=3), label='mutations')
    for mutation in mutations:
        mutate_file(os.path.join(directory, name), mutation)
    check_contract(kind, reader.read(directory), f'{name} after {mutations}')


@pytest.mark.parametrize('compression', COMPRESSIONS)
@pytest.mark.parametrize('kind', KINDS)
@FUZZ
@given(data=st.data())
def test_fuzz_shard_bytes(reader: ReadServer, pristine: dict, scratch: Any, kind: str, compression: str | None,
                          data: st.DataObject) -> None:
    _fuzz_shard_bytes(reader, pristine, scratch, kind, compression, data)


@pytest.mark.soak
@pytest.mark.parametrize('compression', COMPRESSIONS)
@pytest.mark.parametrize('kind', KINDS)
@SOAK
@given(data=st.data())
def test_soak_fuzz_shard_bytes(reader: ReadServer, pristine: dict, scratch: Any, kind: str,
                               compression: str | None, data: st.DataObject) -> None:
    _fuzz_shard_bytes(reader, pristine, scratch, kind, compression, data)


# ----------------------------------------------------------------------------------------------------------------
# Fuzz: index.json fields and text.
INTERESTING_INTS = [0, 1, -1, 2, 7, 23, 24, 25, 255, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, (1 << 63) - 1,
                    1 << 63, 1 << 64, 10 ** 30, -(1 << 63)]
INTERESTING_STRINGS = ['', '.', '..', '../x', '../../etc/passwd', '/etc/passwd', 'a/../b', './x', 'a//b', 'C:\\x',
                       'x\\..\\y', 'shard.00000.mds', 'shard.00001.json.meta', 'index.json', '\0', 'mds', 'json',
                       'csv', 'tsv', 'xsv', 'pkl', 'int', 'str', 'bytes', 'json', 'ndarray', 'ndarray:uint8:4',
                       'ndarray:int16:1000000000', 'ndarray:float64:100000,100000,100000', 'str_decimal',
                       'zstd', 'zstd:99', 'gz', 'br', 'lz4', 'snappy', 'bz2', 'nope', 'sha1', 'xxh64', 'ff', 'FF',
                       '\n', ',', '\t', 'é', 'üüü']
SCALARS = (st.none() | st.booleans() | st.sampled_from(INTERESTING_INTS) | st.integers(-(1 << 70), 1 << 70)
           | st.floats() | st.sampled_from(INTERESTING_STRINGS) | st.text(max_size=12))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(['basename', 'bytes', 'hashes', 'x', '']), inner,
                                             max_size=3), max_leaves=6)


def _fuzz_index_fields(reader: ReadServer, pristine: dict, scratch: Any, kind: str, compression: str | None,
                       data: st.DataObject) -> None:
    directory = copy_dataset(pristine[(kind, compression)], scratch())
    index = load_index(directory)
    edits = []
    for _ in range(data.draw(st.integers(1, 3), label='edits')):
        path = data.draw(st.sampled_from(index_paths(index)), label='path')
        action = data.draw(st.sampled_from(['replace', 'replace', 'delete', 'add']), label='action')
        if action == 'delete' and path:
            index = set_path(index, path, None, delete=True)
        elif action == 'add' and (isinstance(_get(index, path), dict) or (path and isinstance(
                _get(index, path[:-1]), dict))):
            target = path if isinstance(_get(index, path), dict) else path[:-1]
            key = data.draw(st.sampled_from(['extra', 'basename', 'samples', 'version', 'format']), label='key')
            index = set_path(index, (*target, key), data.draw(JSON_VALUES, label='value'))
        else:
            index = set_path(index, path, data.draw(JSON_VALUES, label='value'))
        edits.append((action, path))
    save_index(directory, index)
    check_contract(kind, reader.read(directory), f'index.json after {edits}: {json.dumps(index)[:600]}')


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


@pytest.mark.parametrize('compression', [None, 'zstd'])
@pytest.mark.parametrize('kind', KINDS)
@FUZZ
@given(data=st.data())
def test_fuzz_index_fields(reader: ReadServer, pristine: dict, scratch: Any, kind: str, compression: str | None,
                           data: st.DataObject) -> None:
    _fuzz_index_fields(reader, pristine, scratch, kind, compression, data)


@pytest.mark.soak
@pytest.mark.parametrize('compression', [None, 'zstd'])
@pytest.mark.parametrize('kind', KINDS)
@SOAK
@given(data=st.data())
def test_soak_fuzz_index_fields(reader: ReadServer, pristine: dict, scratch: Any, kind: str,
                                compression: str | None, data: st.DataObject) -> None:
    _fuzz_index_fields(reader, pristine, scratch, kind, compression, data)


@pytest.mark.parametrize('kind', ['mds', 'json', 'csv'])
@FUZZ
@given(data=st.data())
def test_fuzz_index_text(reader: ReadServer, pristine: dict, scratch: Any, kind: str, data: st.DataObject) -> None:
    directory = copy_dataset(pristine[(kind, None)], scratch())
    mutations = data.draw(st.lists(MUTATIONS, min_size=1, max_size=4), label='mutations')
    for mutation in mutations:
        mutate_file(os.path.join(directory, 'index.json'), mutation)
    check_contract(kind, reader.read(directory), f'index.json after {mutations}')


# ----------------------------------------------------------------------------------------------------------------
# Specific hostile cases.
def _refused(reader: ReadServer, directory: str, error: type[StreamingError], **kwargs: Any) -> dict[str, Any]:
    result = reader.read(directory, **kwargs)
    assert not result['ok'], f'hostile input was accepted: {directory}'
    assert error.__name__ in result['mro'] + result.get('causes', []), describe(result)  # a prepare error wraps
    assert refused_properly(result), describe(result)
    return result


@pytest.mark.parametrize('basename', ['../outside.mds', '../../outside.mds', 'sub/../../outside.mds',
                                      '/ABSOLUTE/outside.mds', './shard.00000.mds', 'a\\..\\outside.mds'])
def test_basename_escaping_the_dataset_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                  basename: str) -> None:
    directory = copy_dataset(pristine[('mds', None)], scratch())
    target = os.path.join(os.path.dirname(directory), 'outside.mds')
    with open(os.path.join(directory, 'shard.00000.mds'), 'rb') as src, open(target, 'wb') as dst:
        dst.write(src.read())  # a real shard sits where the name points: only the check stands in the way
    basename = basename.replace('/ABSOLUTE/outside.mds', target)
    index = load_index(directory)
    index['shards'][0]['raw_data']['basename'] = basename
    save_index(directory, index)
    result = _refused(reader, directory, UnsafePathError)
    assert 'escapes' in result['message'] or 'outside' in result['message']


@pytest.mark.parametrize('kind', ['mds', 'json'])
def test_basename_escaping_through_a_remote_index_is_refused_before_any_download(
        tmp_path: Any, pristine: dict, kind: str) -> None:
    remote = copy_dataset(pristine[(kind, None)], str(tmp_path / 'remote'))
    index = load_index(remote)
    index['shards'][0]['raw_data']['basename'] = '../../escaped.bin'
    save_index(remote, index)
    local = tmp_path / 'deep' / 'local'
    with pytest.raises(UnsafePathError):
        StreamingDataset(remote=remote, local=str(local), batch_size=1)
    assert not (tmp_path / 'escaped.bin').exists() and not (tmp_path / 'deep' / 'escaped.bin').exists()


@pytest.mark.parametrize('how', ['file', 'directory'])
def test_symlink_escaping_the_dataset_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                 tmp_path: Any, how: str) -> None:
    directory = copy_dataset(pristine[('mds', None)], scratch())
    outside = tmp_path / 'outside'
    outside.mkdir()
    name = 'shard.00000.mds'
    if how == 'file':
        os.replace(os.path.join(directory, name), outside / name)
        os.symlink(outside / name, os.path.join(directory, name))
    else:  # the shard sits in a subdirectory that is a symlink to a directory outside
        os.replace(os.path.join(directory, name), outside / name)
        os.symlink(outside, os.path.join(directory, 'sub'))
        index = load_index(directory)
        index['shards'][0]['raw_data']['basename'] = f'sub/{name}'
        save_index(directory, index)
    result = _refused(reader, directory, UnsafePathError)
    assert 'symlink' in result['message']


def test_symlink_inside_the_dataset_is_allowed(reader: ReadServer, pristine: dict, scratch: Any) -> None:
    directory = copy_dataset(pristine[('mds', None)], scratch())
    os.makedirs(os.path.join(directory, 'real'))
    os.replace(os.path.join(directory, 'shard.00000.mds'), os.path.join(directory, 'real', 'shard.00000.mds'))
    os.symlink(os.path.join(directory, 'real', 'shard.00000.mds'), os.path.join(directory, 'shard.00000.mds'))
    assert reader.read(directory)['ok']


def test_a_directory_with_a_link_out_read_as_a_remote_is_copied_with_the_link_followed(pristine: dict, scratch: Any,
                                                                                       tmp_path: Any) -> None:
    """The refusal above is for a directory read in place (the cache would decompress, evict or delete beside the
    link's target); its message offers reading the directory as a remote with a ``local=`` cache. That copies the
    files, the link followed as ``cp -L`` does: every sample reads, and evicting the copy leaves the target alone."""
    from streaming_core import StreamingDataset
    directory = copy_dataset(pristine[('mds', None)], scratch())
    outside = tmp_path / 'outside'
    outside.mkdir()
    name = 'shard.00000.mds'
    os.replace(os.path.join(directory, name), outside / name)
    os.symlink(outside / name, os.path.join(directory, name))
    target = (outside / name).read_bytes()
    local = str(tmp_path / 'cache')
    dataset = StreamingDataset(remote=directory, local=local, batch_size=1)
    assert len(list(dataset)) == dataset.num_samples > 0
    assert not os.path.islink(os.path.join(local, name))
    dataset.evict_shard(0)
    assert not os.path.exists(os.path.join(local, name)) and (outside / name).read_bytes() == target


@pytest.mark.parametrize('kind', ['mds', 'json', 'csv'])
@pytest.mark.parametrize('where', ['last', 'middle', 'first'])
def test_offsets_past_the_end_or_out_of_order_are_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                          kind: str, where: str) -> None:
    directory = copy_dataset(pristine[(kind, None)], scratch())
    name = next(n for n in shard_files(directory) if n.endswith('.mds') or n.endswith('.meta'))
    path = os.path.join(directory, name)
    with open(path, 'rb') as handle:
        data = bytearray(handle.read())
    (count,) = struct.unpack_from('<I', data, 0)
    slot = {'first': 0, 'middle': count // 2, 'last': count}[where]
    struct.pack_into('<I', data, 4 + 4 * slot, len(data) + 1000 if where != 'first' else 1)
    with open(path, 'wb') as handle:
        handle.write(bytes(data))
    _refused(reader, directory, ShardCorruptError)


@pytest.mark.parametrize('kind', ['mds', 'json', 'tsv'])
@pytest.mark.parametrize('delta', [-1, 1, 1000])
def test_sample_count_disagreeing_with_the_file_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                           kind: str, delta: int) -> None:
    directory = copy_dataset(pristine[(kind, None)], scratch())
    index = load_index(directory)
    index['shards'][0]['samples'] += delta
    save_index(directory, index)
    _refused(reader, directory, StreamingError)


@pytest.mark.parametrize('kind', ['mds', 'json'])
def test_header_count_disagreeing_with_the_index_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                            kind: str) -> None:
    directory = copy_dataset(pristine[(kind, None)], scratch())
    name = next(n for n in shard_files(directory) if n.endswith('.mds') or n.endswith('.meta'))
    mutate_file(os.path.join(directory, name), Mutation('put_u32', 0, 3))
    _refused(reader, directory, ShardCorruptError)


def _bomb(family: str, chunks: int = 8) -> bytes:
    """``chunks`` x 64 MiB of zeros compressed (512 MiB: past the capped reader's headroom), cheaply: concatenated
    members or frames where the format allows it, a streaming compressor for brotli; snappy's single block states
    its length up front, so 64 MiB of it is enough."""
    from streaming_core.storage.compression import get_compressor
    chunk = b'\0' * (64 << 20)
    if family == 'br':
        import brotli
        compressor = brotli.Compressor(quality=0)
        return b''.join(compressor.process(chunk) for _ in range(chunks)) + compressor.finish()
    codec = get_compressor(family)
    levels = list(codec.levels)
    member = codec.compress(chunk, (1 if family == 'gz' else levels[0]) if levels else None)
    return member if family == 'snappy' else member * chunks


@pytest.mark.parametrize('compression', ['zstd', 'gz', 'bz2', 'lz4', 'br', 'snappy'])
def test_decompression_bomb_is_bounded_by_the_declared_size(reader: ReadServer, tmp_path: Any,
                                                            compression: str) -> None:
    directory = write_dataset(str(tmp_path / 'ds'), 'mds', 4, compression=compression, size_limit=1 << 20)
    index = load_index(directory)
    entry = index['shards'][0]
    bomb = _bomb(compression)
    with open(os.path.join(directory, entry['zip_data']['basename']), 'wb') as handle:
        handle.write(bomb)
    entry['zip_data']['bytes'] = len(bomb)
    entry['zip_data']['hashes'] = {}
    save_index(directory, index)
    result = _refused(reader, directory, ShardCorruptError)
    assert 'declared size' in result['message'] and entry['zip_data']['basename'] in result['message']
    assert result['seconds'] < 10


def test_decompression_exhausting_memory_fails_with_an_error_naming_the_shard(reader: ReadServer,
                                                                              tmp_path: Any) -> None:
    """A declared size the capped reader cannot hold: a StreamingError naming the shard, never a crash."""
    directory = write_dataset(str(tmp_path / 'ds'), 'mds', 4, compression='zstd', size_limit=1 << 20)
    index = load_index(directory)
    entry = index['shards'][0]
    bomb = _bomb('zstd')
    with open(os.path.join(directory, entry['zip_data']['basename']), 'wb') as handle:
        handle.write(bomb)
    entry['zip_data']['bytes'] = len(bomb)
    entry['raw_data']['bytes'] = 1 << 31  # a size a real shard may have
    save_index(directory, index)
    result = reader.read(directory)
    assert not result['ok'] and result['streaming'], describe(result)
    assert 'shard.00000.mds' in result['message']


def test_pkl_column_needs_allow_unsafe_types(reader: ReadServer, tmp_path: Any) -> None:
    from streaming_mds import MDSWriter
    directory = str(tmp_path / 'pkl')
    with MDSWriter(out=directory, columns={'id': 'int', 'obj': 'pkl'}, size_limit=1 << 9) as writer:
        for i in range(10):
            writer.write({'id': i, 'obj': {'i': i}})
    result = _refused(reader, directory, UnsafeTypeError)
    assert 'allow_unsafe_types' in result['message']
    allowed = reader.read(directory, allow_unsafe_types=True)
    assert allowed['ok'] and allowed['samples'] == 10, describe(allowed)
    # A pkl column slipped into the index of a safe dataset is refused too.
    safe = write_dataset(str(tmp_path / 'safe'), 'mds')
    index = load_index(safe)
    index['shards'][0]['column_encodings'][index['shards'][0]['column_names'].index('blob')] = 'pkl'
    save_index(safe, index)
    _refused(reader, safe, UnsafeTypeError)


@pytest.mark.parametrize('text', [
    '{"shards": [], "version": 1}', '{"shards": [], "version": 3}', '{"shards": [], "version": "2"}',
    '{"shards": [], "version": true}', '{"shards": [], "version": 2.0000001}', '{"shards": []}',
    '{"version": 2}', '{"shards": {}, "version": 2}', '{"shards": [1], "version": 2}', '[]', '"index"', '2',
    'null', '', '{', '\ufeff{"shards": [], "version": 1}', '[' * 100000, '{"shards": [' + '[' * 50000 + ']}',
    b'\xff\xfe\x00garbage',
])
def test_index_of_the_wrong_version_or_type_is_refused(reader: ReadServer, tmp_path: Any, text: Any) -> None:
    directory = tmp_path / 'ds'
    directory.mkdir()
    (directory / 'index.json').write_bytes(text if isinstance(text, bytes) else text.encode('utf-8'))
    _refused(reader, str(directory), IndexFormatError)


@pytest.mark.parametrize('field, value', [('version', 1), ('version', None), ('format', 'nope'), ('format', 7),
                                          ('samples', -1), ('samples', '24'), ('samples', True),
                                          ('compression', 'zstd:99'), ('raw_data', None), ('hashes', 'sha1')])
def test_shard_entry_of_the_wrong_version_or_type_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                                             field: str, value: Any) -> None:
    directory = copy_dataset(pristine[('mds', None)], scratch())
    index = load_index(directory)
    index['shards'][1][field] = value
    save_index(directory, index)
    _refused(reader, directory, StreamingError)


# ----------------------------------------------------------------------------------------------------------------
# Regression tests of the bugs this matrix found (each was first pinned by a strict xfail).
def _corrupt_text_column(directory: str, column: str, replacement: bytes) -> None:
    """Overwrite the first byte of sample 0's value in ``column`` of the first MDS shard."""
    from streaming_mds.reader import MDSReader
    index = load_index(directory)
    entry = index['shards'][0]
    path = os.path.join(directory, entry['raw_data']['basename'])
    view = MDSReader(entry).open([path])
    start = view._offsets[0]
    view.close()
    names, sizes = entry['column_names'], entry['column_sizes']
    var = [n for n, s in zip(names, sizes) if not s]
    with open(path, 'rb') as handle:
        data = bytearray(handle.read())
    lengths = struct.unpack_from(f'<{len(var)}I', data, start)
    pos = start + 4 * len(var)
    for name, size in zip(names, sizes):
        if name == column:
            break
        pos += size or lengths[var.index(name)]
    data[pos:pos + len(replacement)] = replacement
    with open(path, 'wb') as handle:
        handle.write(bytes(data))


@pytest.mark.parametrize('column, replacement', [('text', b'\xff'), ('obj', b'\x01'), ('si', b'x'), ('sf', b'x'),
                                                 ('sd', b'\xff')])
def test_mds_text_codec_errors_are_shard_corrupt_errors(reader: ReadServer, pristine: dict, scratch: Any,
                                                        column: str, replacement: bytes) -> None:
    directory = copy_dataset(pristine[('mds-text', None)], scratch())
    _corrupt_text_column(directory, column, replacement)
    result = _refused(reader, directory, ShardCorruptError)
    assert 'shard.00000.mds' in result['message']


@pytest.mark.parametrize('line', [b'{"id": 0, "sc0re": 0.0, "text": "row 0 text"}', b'[0, "row 0 text", 0.0000]',
                                  b'{"id": 0, "score": 0.0, "text": 5, "x": 1}'])
def test_json_reader_checks_each_line_against_the_columns(reader: ReadServer, pristine: dict, scratch: Any,
                                                          line: bytes) -> None:
    directory = copy_dataset(pristine[('json', None)], scratch())
    path = os.path.join(directory, 'shard.00000.json')
    with open(path, 'rb') as handle:
        data = handle.read()
    first, rest = data.split(b'\n', 1)
    line = line[:len(first)].ljust(len(first))  # same length: the offsets stay valid
    with open(path, 'wb') as handle:
        handle.write(line + b'\n' + rest)
    _refused(reader, directory, ShardCorruptError)


@pytest.mark.parametrize('kind', ['csv', 'tsv', 'xsv'])
def test_xsv_line_with_extra_fields_is_refused(reader: ReadServer, pristine: dict, scratch: Any,
                                               kind: str) -> None:
    directory = copy_dataset(pristine[(kind, None)], scratch())
    separator = {'csv': b',', 'tsv': b'\t', 'xsv': b'|'}[kind]
    path = os.path.join(directory, f'shard.00000.{kind}')
    with open(path, 'rb') as handle:
        header, first, rest = handle.read().split(b'\n', 2)
    fields = first.split(separator)  # id, score, text: turn a space of the text into an extra separator
    fields[-1] = fields[-1].replace(b' ', separator, 1)
    with open(path, 'wb') as handle:
        handle.write(header + b'\n' + separator.join(fields) + b'\n' + rest)
    _refused(reader, directory, ShardCorruptError)


@pytest.mark.parametrize('value', [[], {}, ['int']])
def test_xsv_non_string_encoding_is_an_index_format_error(reader: ReadServer, pristine: dict, scratch: Any,
                                                          value: Any) -> None:
    directory = copy_dataset(pristine[('csv', None)], scratch())
    index = load_index(directory)
    index['shards'][0]['column_encodings'][0] = value
    save_index(directory, index)
    _refused(reader, directory, IndexFormatError)


@pytest.mark.parametrize('samples', [1 << 40, (1 << 63) - 1, 1 << 64, 10 ** 30])
def test_sample_count_impossible_for_the_shard_size_is_refused(reader: ReadServer, pristine: dict,
                                                               scratch: Any, samples: int) -> None:
    directory = copy_dataset(pristine[('mds', None)], scratch())
    index = load_index(directory)
    index['shards'][0]['samples'] = samples
    save_index(directory, index)
    _refused(reader, directory, IndexFormatError)


@pytest.mark.parametrize('size', [1 << 32, 1 << 40])
def test_raw_size_beyond_the_shard_limit_is_refused(reader: ReadServer, tmp_path: Any, size: int) -> None:
    directory = write_dataset(str(tmp_path / 'ds'), 'mds', 4, compression='zstd', size_limit=1 << 20)
    index = load_index(directory)
    index['shards'][0]['raw_data']['bytes'] = size
    save_index(directory, index)
    _refused(reader, directory, IndexFormatError)


def test_empty_index_raises_a_streaming_error(reader: ReadServer, tmp_path: Any) -> None:
    directory = tmp_path / 'empty'
    directory.mkdir()
    (directory / 'index.json').write_text('{"shards": [], "version": 2}')
    _refused(reader, str(directory), StreamingError)
