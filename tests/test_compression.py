"""Compression strings and the builtin gz/bz2 compressors: the reference's valid set, levels, extensions, errors,
round trips at every level, multi-member input and bounded decompression."""

from __future__ import annotations

import bz2
import gzip
import os
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.errors import ShardCorruptError
from streaming_core.storage.compression import (
    UnknownCompressionError,
    compress,
    compression_names,
    decompress,
    get_compression_extension,
    get_compressions,
    get_compressor,
    is_compression,
    parse_compression,
)

REFERENCE_FAMILIES = {'br': (range(0, 12), 11), 'bz2': (range(1, 10), 9), 'gz': (range(0, 10), 9),
                      'snappy': (range(0), None), 'zstd': (range(1, 23), 3)}
PAYLOADS = [b'', b'hello', os.urandom(2000) + b'abc' * 10000]


def _need_plugin() -> None:
    if 'zstd' not in {name.partition(':')[0] for name in compression_names()}:
        pytest.skip('streaming-compression is not installed')


def test_reference_valid_strings() -> None:
    _need_plugin()
    reference = set()
    for family, (levels, _) in REFERENCE_FAMILIES.items():
        reference.add(family)
        reference.update(f'{family}:{level}' for level in levels)
    assert len(reference) == 58
    assert reference <= get_compressions()
    assert get_compressions() - reference == {'lz4'} | {f'lz4:{level}' for level in range(17)}


@pytest.mark.parametrize('text', [None, '', 'br', 'br:7', 'br:0', 'gz:4', 'gz:0', 'bz2:1', 'zstd:22', 'snappy',
                                  'zstd', 'lz4', 'lz4:16'])
def test_is_compression_true(text: str | None) -> None:
    _need_plugin()
    assert is_compression(text)


@pytest.mark.parametrize('text', ['xyz', 'zstd:0', 'zstd:07', 'snappy:1', 'gzip', 'br:12', 'gz:10', 'bz2:0',
                                  'zstd:23', 'br:-1', 'zstd:', ':3', 'ZSTD', 'lz4:17'])
def test_is_compression_false(text: str) -> None:
    assert not is_compression(text)


@pytest.mark.parametrize('family', sorted(REFERENCE_FAMILIES))
def test_levels_defaults_extensions(family: str) -> None:
    _need_plugin()
    levels, default = REFERENCE_FAMILIES[family]
    compressor = get_compressor(family)
    assert list(compressor.levels) == list(levels)
    assert compressor.default_level == default
    assert compressor.extension == family == get_compression_extension(family)
    assert parse_compression(family) == (compressor, default)
    for level in levels:
        assert get_compression_extension(f'{family}:{level}') == family


@pytest.mark.parametrize('text', ['br:99', 'gz:99'])
def test_bad_level_message(text: str) -> None:
    _need_plugin()
    with pytest.raises(ValueError, match='is not a supported compression algorithm'):
        compress(text, b'x')


def test_unknown_family_is_a_value_error_with_hint() -> None:
    with pytest.raises(UnknownCompressionError) as info:
        parse_compression('xz')
    assert isinstance(info.value, ValueError) and isinstance(info.value, LookupError)
    assert 'Installed compression names' in str(info.value)


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_builtin_round_trips_at_every_level(family: str) -> None:
    for level in REFERENCE_FAMILIES[family][0]:
        for payload in PAYLOADS:
            data = compress(f'{family}:{level}', payload)
            assert decompress(family, data) == payload
            assert decompress(f'{family}:{level}', data, len(payload)) == payload


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_builtin_formats_are_standard(family: str) -> None:
    data = compress(family, b'hello')
    module = gzip if family == 'gz' else bz2
    assert module.decompress(data) == b'hello'
    assert decompress(family, module.compress(b'world')) == b'world'
    assert data[:3] == (b'\x1f\x8b\x08' if family == 'gz' else b'BZh')


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_concatenated_members(family: str) -> None:
    data = compress(family, b'abc') + compress(family, b'def')
    assert decompress(family, data) == b'abcdef'


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_type_errors(family: str) -> None:
    for bad in ('text', 5, None):
        with pytest.raises(TypeError):
            compress(family, bad)


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_truncated_and_corrupt(family: str) -> None:
    data = compress(family, PAYLOADS[2])
    for bad in (data[:len(data) // 2], data[:5], b'', b'not compressed at all', data + b'garbage!'):
        with pytest.raises(ShardCorruptError):
            decompress(family, bad, len(PAYLOADS[2]))


@pytest.mark.parametrize('family', ['gz', 'bz2'])
def test_bomb_bounded_by_declared_size(family: str) -> None:
    bomb = compress(family, bytes(64 << 20))
    assert len(bomb) < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ShardCorruptError, match='past the declared size of 1000 bytes'):
            decompress(family, bomb, 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    with pytest.raises(ShardCorruptError):
        decompress(family, compress(family, b'x' * 101), 100)
    assert decompress(family, compress(family, b'x' * 100), 100) == b'x' * 100


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=5000), st.sampled_from(['gz:0', 'gz:1', 'gz:9', 'bz2:1', 'bz2:9']))
def test_builtin_hypothesis_round_trip(payload: bytes, text: str) -> None:
    assert decompress(text, compress(text, payload), len(payload)) == payload
