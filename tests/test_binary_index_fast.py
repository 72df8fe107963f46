"""The one-template fast build of a small index (issue 15): byte for byte the general build's file, and every doubt
(another template, a name to refuse, a malformed entry, a second "shards" key) left to the general path."""

from __future__ import annotations

import io
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming_core.errors import IndexFormatError
from streaming_core.reading import binary_index_fast
from streaming_core.reading.binary_index import FORMAT_VERSION, _add_template, build_binary
from streaming_core.reading.binary_index_fast import build_parsed
from streaming_core.reading.index_file_stream import iter_index_entries
from tests.fixtures.data import write_mds


@pytest.fixture(autouse=True, params=['json', 'msgspec', 'msgspec-dicts'])
def decoder(request, monkeypatch):
    """Every test runs with each of the parsers the fast path uses (``msgspec`` from MSGSPEC_BYTES: shard entries
    decoded as records, or as dicts when they do not fit one record type)."""
    monkeypatch.setattr(binary_index_fast, 'MSGSPEC_BYTES', 1 << 62 if request.param == 'json' else 0)
    if request.param == 'msgspec-dicts':
        monkeypatch.setattr(binary_index_fast, '_decode_records', lambda msgspec, data: None)
    return request.param


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
                                    'negative bytes', 'upper hex', 'missing hashes', 'two shards keys', 'version',
                                    'escaped shards key', 'bytes beyond 2**64', 'truncated', 'unpaired surrogate',
                                    'a null first shard', 'a number for a shard'])
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
    elif damage == 'bytes beyond 2**64':  # msgspec before 0.19 decoded this one wrongly
        raw['bytes'] = 19446744073709551617
    elif damage == 'unpaired surrogate':  # valid JSON text ("\\ud800"), but no file's name
        raw['basename'] = 'x\ud800.mds'
    elif damage == 'a null first shard':
        shards[0] = None
    elif damage == 'a number for a shard':
        shards[3] = 1
    data = json.dumps(index).encode()
    if damage == 'two shards keys':
        data = data[:-1] + b', "shards": []}'
    elif damage == 'escaped shards key':  # both parsers keep the last list; the streamed read saw both
        data = data[:-1] + b', "\\u0073hards": ' + json.dumps(shards[:2]).encode() + b'}'
    elif damage == 'truncated':
        data = data[:-40]
    assert build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template) is None
    if damage in ('two shards keys', 'escaped shards key'):
        with pytest.raises(IndexFormatError, match='two "shards" keys'):
            _general(data)
    if damage == 'two templates':
        assert len(_general(data)[0]['templates']) == 2
    if damage == 'unpaired surrogate':  # named, on the general path and the streamed one, never a bare UnicodeError
        with pytest.raises(IndexFormatError, match=r"shard 3 raw_data: file name 'x\\ud800\.mds' is not UTF-8 text"):
            _general(data)


_JSON = st.recursive(st.none() | st.booleans() | st.integers(min_value=-(1 << 70), max_value=1 << 70)
                     | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_JSON, ensure_ascii=st.booleans())
def test_both_parsers_give_the_same_objects(decoder, value, ensure_ascii):
    """(The fixture only sets which parser ``_parse`` uses: nothing to reset between examples.) Records, for the
    shard entries of an index only, have a test of their own below."""
    data = json.dumps(value, ensure_ascii=ensure_ascii).encode('utf-8')
    parsed, expected = binary_index_fast._decode_dicts(data), json.loads(data)
    assert parsed == expected and repr(parsed) == repr(expected)


@pytest.mark.parametrize('extra', [b'NaN', b'"\\ud800"', b'1e400'])
def test_a_text_only_json_takes_is_left_to_the_general_path_by_msgspec(tmp_path, decoder, extra):
    """``msgspec`` refuses a few texts ``json`` takes (here in a top-level key the index does not use): with it, the
    fast path gives way to the general one; with ``json``, the fast build is the general one's."""
    data = json.dumps(_index(tmp_path)).encode()[:-1] + b', "x": ' + extra + b'}'
    if decoder == 'msgspec-dicts':
        assert build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template) is None
        assert _general(data)[0]['num_shards'] == len(_index(tmp_path / 'again')['shards'])
    elif decoder == 'msgspec' and extra != b'1e400':  # records skip a key they do not use; msgspec refuses the rest
        assert build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template) is None
    else:
        _same(data)


_KEYS = st.sampled_from(['samples', 'format', 'raw_data', 'zip_data', 'column_names', 'x', 'raw_meta'])
_FILE = st.none() | st.fixed_dictionaries({'basename': st.text(max_size=5), 'bytes': st.integers(-2, 1 << 65),
                                           'hashes': st.dictionaries(st.text(max_size=3), st.text(max_size=3),
                                                                     max_size=2)}) | st.integers() | _JSON
_ENTRY = st.dictionaries(_KEYS, st.none() | st.integers(-2, 9) | st.text(max_size=3) | _FILE, min_size=1,
                         max_size=5)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=_ENTRY, rest=st.lists(_ENTRY, max_size=4), same=st.booleans(), version=_JSON, extra=_JSON)
def test_records_hold_exactly_what_json_gives_or_give_way(decoder, first, rest, same, version, extra):
    """Shard entries decoded as records (``msgspec`` structs of the first entry's keys) read the same values as the
    dicts ``json`` gives, for every entry, or the decoder gives way (None) to dicts: never a record missing a key
    an entry has, or holding a value it does not."""
    if decoder != 'msgspec':  # the decoder is called directly: once is enough
        return
    import msgspec
    shards = [first] + ([dict(first) for _ in rest] if same else rest)
    data = json.dumps({'x': extra, 'shards': shards, 'version': version}).encode()
    records = binary_index_fast._decode_records(msgspec, data)
    if records is None:
        return
    expected = json.loads(data)
    assert records['version'] == expected['version']
    assert len(records['shards']) == len(expected['shards'])
    for record, entry in zip(records['shards'], expected['shards']):
        assert set(type(record).__struct_fields__) == set(entry)
        for key, value in entry.items():
            got = getattr(record, key)
            if type(got).__name__ == 'File':
                got = {key: getattr(got, key) for key in value}
            assert got == value and repr(got) == repr(value), key


def test_an_index_of_entries_with_their_keys_in_another_order_builds_as_the_general_path(tmp_path, decoder):
    """Records take entries whose keys come in another order (the result is the general path's, which sorts them);
    dicts give way to the general path."""
    index = _index(tmp_path, hashes=['sha1'])
    index['shards'][2] = dict(reversed(list(index['shards'][2].items())))
    data = json.dumps(index).encode()
    if decoder == 'msgspec':
        _same(data)
    else:
        assert build_parsed(data, 'p', 'id', version=FORMAT_VERSION, add_template=_add_template) is None
