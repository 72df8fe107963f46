"""Compression and hashing helpers through ``streaming.base.compression`` / ``hashing`` (spec formats.md 5 and 6)."""

from __future__ import annotations

import bz2
import gzip

import pytest
from streaming.base import compression as comp
from streaming.base.hashing import get_hash, get_hashes, is_hash

FAMILIES = {'br': (list(range(12)), 11), 'bz2': (list(range(1, 10)), 9), 'gz': (list(range(10)), 9),
            'snappy': ([], None), 'zstd': (list(range(1, 23)), 3)}
CLASSES = {'br': comp.Brotli, 'bz2': comp.Bzip2, 'gz': comp.Gzip, 'snappy': comp.Snappy, 'zstd': comp.Zstandard}
PAYLOADS = [b'', b'hello', bytes(range(256)) * 40]


def test_the_58_compression_strings() -> None:
    expected = {family for family in FAMILIES} | {f'{f}:{lvl}' for f, (levels, _) in FAMILIES.items()
                                                   for lvl in levels}
    assert len(expected) == 58
    assert expected <= comp.get_compressions()
    for text in ('br', 'br:7', 'gz:4', 'zstd:22', 'snappy', None):
        assert comp.is_compression(text), text
    for text in ('xyz', 'zstd:0', 'zstd:07', 'snappy:1', 'gzip', 'br:12'):
        assert not comp.is_compression(text), text
    assert comp.get_compression_extension('zstd:7') == 'zstd'
    assert set(comp.compressions) == expected  # the reference's {string: instance} table


@pytest.mark.parametrize('family', sorted(FAMILIES))
def test_every_level_round_trips(family: str) -> None:
    levels, default = FAMILIES[family]
    cls = CLASSES[family]
    assert cls.extension == family and cls.levels == levels
    if default is not None:
        assert cls().level == default
    for text in [family] + [f'{family}:{lvl}' for lvl in levels]:
        for payload in PAYLOADS:
            packed = comp.compress(text, payload)
            assert comp.decompress(text, packed) == payload
            assert comp.decompress(family, packed) == payload  # a reader needs the family only
    with pytest.raises(TypeError):
        cls().compress('not bytes')  # type: ignore[arg-type]


def test_exact_streams() -> None:
    assert comp.compress('br:1', b'hello').hex() == '0b028068656c6c6f03'
    assert comp.compress('snappy', b'hello') == bytes.fromhex('051068656c6c6f')
    assert gzip.decompress(comp.compress('gz:5', b'x' * 100)) == b'x' * 100
    assert bz2.decompress(comp.compress('bz2', b'y' * 100)) == b'y' * 100
    assert comp.compress('bz2:3', b'a')[:4] == b'BZh3'


def test_none_passes_through_and_bad_levels_are_refused_up_front() -> None:
    assert comp.compress(None, b'data') == b'data'
    assert comp.decompress(None, b'data') == b'data'
    for text in ('br:99', 'gz:99'):
        with pytest.raises(ValueError, match='is not a supported compression algorithm'):
            comp.compress(text, b'x')
        with pytest.raises(ValueError, match='is not a supported compression algorithm'):
            comp.decompress(text, comp.compress('gz', b'x'))
    with pytest.raises(ValueError, match='Invalid compression level'):
        comp.Gzip(99)


def test_hashes() -> None:
    expected = {'md5', 'sha1', 'sha224', 'sha256', 'sha384', 'sha512', 'sha3_224', 'sha3_256', 'sha3_384',
                'sha3_512', 'blake2b', 'blake2s', 'xxh32', 'xxh64', 'xxh128', 'xxh3_64', 'xxh3_128'}
    assert expected <= get_hashes()
    assert all(is_hash(name) for name in expected) and not is_hash('shake_128') and not is_hash('sha3')
    assert get_hash('md5', b'hello') == '5d41402abc4b2a76b9719d911017c592'
    assert get_hash('sha3_256', b'hello') == '3338be694f50c5f338814986cdf0686453a888b84f424d792af4b9202398f392'
    assert get_hash('xxh3_64', b'hello') == '9555e8555c62dcfd'
    for bad in ('', 'sha3'):
        with pytest.raises(ValueError):
            get_hash(bad, b'x')
