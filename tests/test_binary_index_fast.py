"""The one-template fast build of a small index (issue 15): byte for byte the general build's file, and every doubt
(another template, a name to refuse, a malformed entry, a second "shards" key) left to the general path."""

from __future__ import annotations

import io
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.reading.binary_index import FORMAT_VERSION, _add_template, build_binary
from streaming_core.reading.binary_index_fast import build_parsed, parse_json
from streaming_core.reading.index_file_stream import iter_index_entries
from tests.fixtures.data import write_mds


def _general(data: bytes) -> tuple[dict, dict]:
    return build_binary(iter_index_entries(io.BytesIO(data), 'p'), 'p', 'id')


def _same(data: bytes) -> None:
    fast = build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template)
    assert fast is not None, 'the fast path applies'
    general = _general(data)
    assert fast[0] == general[0]
    for name, column in general[1].items():
        assert b''.join(fast[1][name].chunks()) == b''.join(column.chunks()), name


def _index(tmp_path, **kwargs) -> dict:
    local = write_mds(str(tmp_path / 'ds'), 90, size_limit=300, **kwargs)
    with open(os.path.join(local, 'index.json')) as handle:
        return json.load(handle)


@pytest.mark.parametrize('compression,hashes', [(None, None), ('zstd', ['sha1', 'xxh64'])])
def test_the_fast_build_equals_the_general_one(tmp_path, compression, hashes):
    index = _index(tmp_path, compression=compression, hashes=hashes)
    _same(json.dumps(index).encode())
    for i, entry in enumerate(index['shards']):  # names not ASCII, denser shards later, shards without samples
        entry['raw_data']['basename'] = f'dir/é-{i}.mds'
        entry['raw_data']['bytes'] += 1000 - 7 * i
        if i % 5 == 0:
            entry['samples'] = 0
    _same(json.dumps(index).encode())


@pytest.mark.parametrize('damage', ['two templates', '../escape', 'leading /', 'dot', 'drive', 'bool samples',
                                    'negative bytes', 'upper hex', 'missing hashes', 'two shards keys', 'version'])
def test_any_doubt_goes_to_the_general_path(tmp_path, damage):
    index = _index(tmp_path, hashes=['sha1'])
    shards = index['shards']
    raw = shards[3]['raw_data']
    if damage == 'two templates':
        shards[3]['size_limit'] = 12345
    elif damage == '../escape':
        raw['basename'] = '../escape.mds'
    elif damage == 'leading /':
        raw['basename'] = '/abs.mds'
    elif damage == 'dot':
        raw['basename'] = 'a/./b.mds'
    elif damage == 'drive':
        raw['basename'] = 'C:evil.mds'
    elif damage == 'bool samples':
        shards[3]['samples'] = True
    elif damage == 'negative bytes':
        raw['bytes'] = -1
    elif damage == 'upper hex':
        raw['hashes']['sha1'] = raw['hashes']['sha1'].upper()
    elif damage == 'missing hashes':
        del raw['hashes']
    elif damage == 'version':
        index['version'] = True
    data = json.dumps(index).encode()
    if damage == 'two shards keys':
        data = data[:-1] + b', "shards": []}'
    assert build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template) is None
    if damage == 'two templates':
        assert len(_general(data)[0]['templates']) == 2


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(1 << 70), max_value=1 << 70) | st.sampled_from([(1 << 63) - 1, -(1 << 63), 1 << 64])
    | st.text(),  # unpaired surrogates included: json.dumps writes them as escapes
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(_JSON, st.booleans())
def test_parse_json_reads_every_text_as_json_does(value, ascii_only):
    """orjson where it agrees with json: an integer beyond 64 bits stays an int (orjson would make it a float),
    NaN, infinities and unpaired surrogates are read, and the two agree on everything else."""
    data = json.dumps(value, ensure_ascii=ascii_only).encode('utf-8', 'surrogatepass')
    try:
        expected = json.loads(data.decode('utf-8'))
    except UnicodeDecodeError:  # an unpaired surrogate written raw: not UTF-8, refused by both
        with pytest.raises(ValueError):
            parse_json(data)
        return
    got = parse_json(data)
    assert json.dumps(got) == json.dumps(expected)  # nan == nan through its text; types through int vs float text
    assert _types(got) == _types(expected)


def test_parse_json_keeps_huge_integers_and_the_last_duplicate_key():
    assert parse_json(b'{"bytes": 18446744073709551616, "a": 1, "a": 2}') == {'bytes': 1 << 64, 'a': 2}
    assert type(parse_json(b'[-9223372036854775809]')[0]) is int


def _types(value):
    if isinstance(value, list):
        return [_types(v) for v in value]
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    return type(value).__name__
