"""Hashes: the reference's 17 names, the spec 6 vectors, errors, and end-to-end hashes in written indexes."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.storage.hashing import UnknownHashError, get_hash, get_hashes, hash_file_data, is_hash

NAMES = {'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'sha3_224', 'sha3_256', 'sha3_384', 'sha3_512',
         'blake2b', 'blake2s', 'xxh32', 'xxh64', 'xxh128', 'xxh3_64', 'xxh3_128'}


def test_exactly_the_reference_names() -> None:
    assert get_hashes() >= NAMES
    from streaming_core.machinery.lookup import get_registry
    assert {n for n in get_registry('hash').names() if get_registry('hash').origin(n) == 'builtin.hashes'} == NAMES


@pytest.mark.parametrize('name,expected', [
    ('md5', '5d41402abc4b2a76b9719d911017c592'),
    ('sha3_256', '3338be694f50c5f338814986cdf0686453a888b84f424d792af4b9202398f392'),
    ('xxh3_64', '9555e8555c62dcfd'),
    ('sha1', 'aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d'),
])
def test_vectors(name: str, expected: str) -> None:
    assert get_hash(name)(b'hello') == expected
    assert get_hash(name)(memoryview(b'hello')) == expected


@settings(max_examples=20, deadline=None)
@given(st.binary(max_size=2000))
def test_matches_hashlib_and_xxhash(data: bytes) -> None:
    for name in NAMES:
        want = getattr(xxhash, f'{name}_hexdigest')(data) if name.startswith('xxh') else \
            getattr(hashlib, name)(data).hexdigest()
        assert get_hash(name)(data) == want
    assert hash_file_data(['md5', 'xxh64'], data) == {'md5': hashlib.md5(data).hexdigest(),
                                                      'xxh64': xxhash.xxh64_hexdigest(data)}


def test_digest_sizes() -> None:
    assert len(get_hash('blake2b')(b'')) == 128 and len(get_hash('blake2s')(b'')) == 64


@pytest.mark.parametrize('name', ['', 'sha3', 'SHA1', 'shake_128', None])
def test_invalid_names(name: Any) -> None:
    with pytest.raises(ValueError):
        get_hash(name)
    assert not is_hash(name)
    if name == 'sha3':
        with pytest.raises(UnknownHashError, match='Installed hash algorithm names'):
            get_hash(name)


@pytest.mark.parametrize('hashes', [None, ['sha1'], ['sha384', 'xxh128']])
@pytest.mark.parametrize('compression', [None, 'gz'])
def test_written_hashes_match_the_files(hashes: list[str] | None, compression: str | None, tmp_path: Any) -> None:
    mds = pytest.importorskip('streaming_mds')
    with mds.MDSWriter(columns={'n': 'int'}, out=str(tmp_path), hashes=hashes, compression=compression,
                       size_limit=256) as writer:
        for i in range(117):
            writer.write({'n': i})
    with open(tmp_path / 'index.json') as handle:
        shards = json.load(handle)['shards']
    assert len(shards) > 1
    for shard in shards:
        assert shard['hashes'] == (hashes or [])
        info = shard['zip_data'] or shard['raw_data']
        with open(os.path.join(tmp_path, info['basename']), 'rb') as handle:
            data = handle.read()
        assert info['hashes'] == {name: get_hash(name)(data) for name in hashes or []}
        if compression:
            from streaming_core.storage.compression import decompress
            raw = decompress(compression, data)
            assert shard['raw_data']['hashes'] == {name: get_hash(name)(raw) for name in hashes or []}
