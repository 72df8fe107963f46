"""index.json v2: FileInfo validation, safe basenames, top-level parsing and the writer's exact text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streaming_core.errors import IndexFormatError, UnsafePathError
from streaming_core.reading.index_file import (
    FileInfo,
    check_basename,
    index_text,
    load_index,
    parse_index_text,
    resolve_inside,
    shard_readers,
    write_index,
)


@pytest.mark.parametrize('name', ['shard.00000.mds', '7/shard.00000.mds', 'a/b/c.json.meta.zstd', 'x..y'])
def test_safe_basenames(name: str) -> None:
    assert check_basename(name, 'here') == name


@pytest.mark.parametrize('name', ['', '/etc/passwd', '../x', 'a/../../x', 'a/./b', 'a//b', 'a\\b', 'C:x', 'a\0b',
                                  '..', '.', 5, None])
def test_unsafe_basenames(name: Any) -> None:
    with pytest.raises(IndexFormatError, match='here'):
        check_basename(name, 'here')


def test_unsafe_basename_is_a_path_error() -> None:
    with pytest.raises(UnsafePathError):
        check_basename('../x', 'here')


def test_symlink_escape(tmp_path: Any) -> None:
    (tmp_path / 'root').mkdir()
    (tmp_path / 'outside').write_text('x')
    (tmp_path / 'root' / 'link').symlink_to(tmp_path / 'outside')
    with pytest.raises(UnsafePathError, match='symlink'):
        resolve_inside(str(tmp_path / 'root'), 'link', 'here')
    assert resolve_inside(str(tmp_path / 'root'), 'a/b', 'here').endswith('root/a/b')


def test_file_info() -> None:
    obj = {'basename': 'shard.00000.mds', 'bytes': 286, 'hashes': {'sha1': 'ab12'}}
    info = FileInfo.from_json(obj, 'here')
    assert (info.basename, info.bytes, dict(info.hashes)) == ('shard.00000.mds', 286, {'sha1': 'ab12'})
    assert info.to_json() == obj


@pytest.mark.parametrize('obj', [
    [], {'basename': 'a', 'bytes': 1}, {'basename': 'a', 'bytes': 1, 'hashes': {}, 'extra': 0},
    {'basename': 'a', 'bytes': -1, 'hashes': {}}, {'basename': 'a', 'bytes': True, 'hashes': {}},
    {'basename': 'a', 'bytes': '1', 'hashes': {}}, {'basename': 'a', 'bytes': 1, 'hashes': {'md5': 'XYZ'}},
    {'basename': 'a', 'bytes': 1, 'hashes': []}, {'basename': '../a', 'bytes': 1, 'hashes': {}},
])
def test_bad_file_info(obj: Any) -> None:
    with pytest.raises(IndexFormatError):
        FileInfo.from_json(obj, 'here')


@pytest.mark.parametrize('text,match', [
    ('', 'empty or corrupted'), ('{', 'empty or corrupted'), ('[]', 'not a JSON object'),
    ('{"shards": [], "version": 1}', 'Unsupported streaming data version: 1'),
    ('{"shards": []}', 'Unsupported streaming data version: None'),
    ('{"shards": [], "version": "2"}', 'Unsupported streaming data version'),
    ('{"shards": [], "version": true}', 'Unsupported streaming data version'),
    ('{"shards": {}, "version": 2}', 'must be a list'), ('{"shards": [1], "version": 2}', 'must be a list'),
])
def test_bad_index_text(text: str, match: str) -> None:
    with pytest.raises(IndexFormatError, match=match):
        parse_index_text(text, 'ds/index.json')


def test_unknown_top_level_keys_ignored() -> None:
    assert parse_index_text('{"shards": [], "version": 2, "extra": {"a": 1}}', 'x')['shards'] == []


def test_index_text_is_pyjson_sorted() -> None:
    shards = [{'b': 1, 'a': {'z': 'caf\u00e9', 'y': None}}]
    assert index_text(shards) == '{"shards": [{"a": {"y": null, "z": "caf\\u00e9"}, "b": 1}], "version": 2}'
    assert index_text([]) == '{"shards": [], "version": 2}'


def test_write_and_load(tmp_path: Any) -> None:
    path = str(tmp_path / 'index.json')
    write_index(path, [])
    assert load_index(path) == {'shards': [], 'version': 2}
    assert [p.name for p in tmp_path.iterdir()] == ['index.json']


def test_shard_readers_rejects_unknown_format_and_version() -> None:
    entry: dict[str, Any] = {'format': 'no-such-format', 'version': 2}
    with pytest.raises(LookupError, match='no-such-format'):
        shard_readers({'shards': [entry]}, 'ds/index.json')
    with pytest.raises(IndexFormatError, match='ds/index.json shard 0'):
        shard_readers({'shards': [{'format': 'mds', 'version': 3}]}, 'ds/index.json')
    with pytest.raises(IndexFormatError):
        shard_readers({'shards': [{'version': 2}]}, 'ds/index.json')


def test_reader_entry_errors_name_the_location() -> None:
    pytest.importorskip('streaming_mds')
    entry = json.loads('{"column_encodings": ["int"], "column_names": ["n"], "column_sizes": [8], '
                       '"compression": null, "format": "mds", "hashes": [], "raw_data": {"basename": "../s", '
                       '"bytes": 1, "hashes": {}}, "samples": 1, "size_limit": null, "version": 2, "zip_data": null}')
    with pytest.raises(UnsafePathError, match='ds/index.json shard 0'):
        shard_readers({'shards': [entry]}, 'ds/index.json')
