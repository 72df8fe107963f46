"""zstd, br, snappy and lz4: the spec's byte vectors, stream formats, every level, hypothesis round trips, hostile
input and decompression bounded by the declared size."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming_core.errors import ShardCorruptError
from streaming_core.storage.compression import compress, decompress, get_compressor

FAMILIES = {'zstd': (range(1, 23), 3), 'br': (range(0, 12), 11), 'snappy': (range(0), None), 'lz4': (range(17), 0)}
PAYLOADS = [b'', b'hello', os.urandom(1500) + b'abc' * 5000]


def test_registered_by_this_plugin() -> None:
    from streaming_core.machinery.lookup import get_registry
    registry = get_registry('compressor')
    for family, (levels, default) in FAMILIES.items():
        assert registry.origin(family) == 'compression'
        assert list(get_compressor(family).levels) == list(levels)
        assert get_compressor(family).default_level == default
        assert get_compressor(family).extension == family


def test_brotli_vector() -> None:
    assert compress('br:1', b'hello') == bytes.fromhex('0b028068656c6c6f03')
    assert decompress('br', bytes.fromhex('0b028068656c6c6f03')) == b'hello'


def test_snappy_raw_block_vector() -> None:
    assert compress('snappy', b'hello') == bytes.fromhex('051068656c6c6f')
    assert decompress('snappy', bytes.fromhex('051068656c6c6f')) == b'hello'
    try:
        import snappy
    except ImportError:
        return
    payload = PAYLOADS[2]
    assert decompress('snappy', snappy.compress(payload)) == payload
    assert snappy.decompress(compress('snappy', payload)) == payload


def test_zstd_single_frame_with_content_size_and_no_checksum() -> None:
    import zstandard
    data = compress('zstd', PAYLOADS[2])
    assert data[:4] == bytes.fromhex('28b52ffd')
    params = zstandard.get_frame_parameters(data)
    assert params.content_size == len(PAYLOADS[2]) and not params.has_checksum and params.dict_id == 0
    assert zstandard.ZstdDecompressor().decompress(data) == PAYLOADS[2]


def test_lz4_frame_with_content_size() -> None:
    import lz4.frame
    data = compress('lz4:9', PAYLOADS[2])
    assert data[:4] == bytes.fromhex('04224d18')
    assert lz4.frame.get_frame_info(data)['content_size'] == len(PAYLOADS[2])
    assert lz4.frame.decompress(data) == PAYLOADS[2]


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_every_level_round_trips(family: str) -> None:
    levels = FAMILIES[family][0]
    for text in [family] + [f'{family}:{level}' for level in levels]:
        for payload in PAYLOADS:
            data = compress(text, payload)
            assert decompress(text, data) == payload
            assert decompress(family, data, len(payload)) == payload


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_type_errors(family: str) -> None:
    for bad in ('text', 5, None):
        with pytest.raises(TypeError):
            compress(family, bad)
    assert decompress(family, memoryview(compress(family, b'abc'))) == b'abc'


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_truncated_corrupt_and_empty(family: str) -> None:
    data = compress(family, PAYLOADS[2])
    for bad in (data[:len(data) // 2], data[:6], b'', b'\xff' * 64):
        with pytest.raises(ShardCorruptError):
            decompress(family, bad, len(PAYLOADS[2]))


@pytest.mark.parametrize('family', ['zstd', 'lz4'])
def test_concatenated_frames(family: str) -> None:
    assert decompress(family, compress(family, b'abc') + compress(family, b'def'), 6) == b'abcdef'
    with pytest.raises(ShardCorruptError):
        decompress(family, compress(family, b'abc') + b'xy', 100)


def test_zstd_frame_without_content_size() -> None:
    import zstandard
    data = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOADS[2])
    assert decompress('zstd', data, len(PAYLOADS[2])) == PAYLOADS[2]
    assert decompress('zstd', data) == PAYLOADS[2]


def _bombs() -> dict[str, Callable[[], bytes]]:
    import lz4.frame
    import zstandard
    zeros = bytes(64 << 20)
    return {
        'zstd-sized': lambda: compress('zstd', zeros),
        'zstd-unsized': lambda: zstandard.ZstdCompressor(write_content_size=False).compress(zeros),
        'br': lambda: compress('br:1', zeros),
        'snappy': lambda: compress('snappy', zeros),
        'lz4-sized': lambda: compress('lz4', zeros),
        'lz4-unsized': lambda: lz4.frame.compress(zeros, store_size=False),
    }


@pytest.mark.parametrize('kind', sorted(_bombs()))
def test_bombs_bounded_by_declared_size(kind: str) -> None:
    bomb = _bombs()[kind]()
    family = kind.partition('-')[0]
    assert len(bomb) < 4 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ShardCorruptError, match='past the declared size of 1000 bytes'):
            decompress(family, bomb, 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f'{kind}: {peak} bytes allocated to refuse a 64 MiB bomb'


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_exact_bound(family: str) -> None:
    data = compress(family, b'y' * 500)
    assert decompress(family, data, 500) == b'y' * 500
    with pytest.raises(ShardCorruptError):
        decompress(family, data, 499)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=20000), st.data())
def test_hypothesis_round_trips(payload: bytes, data: st.DataObject) -> None:
    family = data.draw(st.sampled_from(sorted(FAMILIES)))
    levels = list(FAMILIES[family][0])
    text = family if not levels else f'{family}:{data.draw(st.sampled_from(levels[:10]))}'
    assert decompress(text, compress(text, payload), len(payload)) == payload
