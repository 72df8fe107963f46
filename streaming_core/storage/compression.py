"""Compression strings (``'zstd'``, ``'zstd:7'``) resolved through the compressor registry.

A compression string is exactly a family name or ``family:level`` with the level written in decimal and one of the
family's levels (set membership, as in the reference: ``zstd:07`` and ``zstd:0`` are invalid). The family name is
also the compressed file's extension. The level only matters when writing.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from streaming_core.errors import UnknownNameError
from streaming_core.machinery.lookup import get_registry
from streaming_core.machinery.protocols import Compressor

__all__ = ['UnknownCompressionError', 'parse_compression', 'get_compressor', 'compress', 'decompress',
           'decompress_file', 'is_compression', 'get_compression_extension', 'compression_names', 'get_compressions']


class UnknownCompressionError(UnknownNameError, ValueError):
    """The compression family is not registered (a ``ValueError`` too, as the reference raised).

    Attributes:
        hint: The registry's explanation without its headline (a close match, the installed names, what to
            install), so a caller that words its own headline does not repeat it.
    """

    hint: str = ''


def parse_compression(text: str) -> tuple[Compressor, int | None]:
    """Split ``'family[:level]'`` and validate it exactly as the reference does (``zstd:07`` is invalid).

    Returns:
        The compressor and the level (the family's default for a bare family name).

    Raises:
        UnknownCompressionError: the family is not registered (with the installed names and the install hint).
        ValueError: ``'Invalid compression: <text> is not a supported compression algorithm: ...'`` for a bad
            level, saying which levels the family takes.
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f'Invalid compression: {text!r} is not a supported compression algorithm: expected a '
                         f'string such as "zstd" or "zstd:7".')
    family, sep, level_text = text.partition(':')
    compressor = _lookup(family, text)
    if not sep:
        return compressor, compressor.default_level
    levels = list(compressor.levels)
    if not levels or level_text not in {str(level) for level in levels}:
        valid = f'levels {levels[0]}..{levels[-1]}' if levels else 'no level'
        raise ValueError(f'Invalid compression: {text} is not a supported compression algorithm: {family} takes '
                         f'{valid}.')
    return compressor, int(level_text)


def get_compressor(family: str) -> Compressor:
    """The compressor registered for a family name.

    Raises:
        UnknownCompressionError: no plugin registered ``family``.
    """
    return _lookup(family, family)


def _lookup(family: str, text: str) -> Compressor:
    """The compressor of ``family``; a miss says once that ``text`` is not supported, then the registry's hint."""
    try:
        return get_registry('compressor').get(family)
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]  # the registry's headline says what ours says
        error = UnknownCompressionError('\n'.join(filter(None, [
            f'Invalid compression: {text} is not a supported compression algorithm.', hint])))
        error.hint = hint
        raise error from None


def is_compression(text: str | None) -> bool:
    """Whether ``text`` is a valid compression string (``None`` and ``''`` mean no compression and are valid)."""
    if not text:
        return True
    try:
        parse_compression(text)
    except (ValueError, UnknownNameError):
        return False
    return True


def compression_names() -> list[str]:
    """Every valid compression string: each family and each ``family:level``."""
    names = []
    for entry in get_registry('compressor').entries():
        names.append(entry.name)
        names.extend(f'{entry.name}:{level}' for level in entry.obj.levels)
    return names


def get_compressions() -> set[str]:
    """The set of valid compression strings (the reference's ``get_compressions``)."""
    return set(compression_names())


def get_compression_extension(text: str) -> str:
    """The file extension (the family) of a compression string."""
    compressor, _ = parse_compression(text)
    return compressor.extension


def compress(text: str | None, data: bytes | memoryview) -> bytes:
    """Compress ``data`` with the compression string ``text`` (``None``: the data unchanged, as the reference)."""
    if text is None:
        return bytes(data)
    compressor, level = parse_compression(text)
    return compressor.compress(data, level)


def decompress(text: str | None, data: bytes | memoryview, max_size: int | None = None) -> bytes:
    """Decompress ``data`` by the family of ``text`` (``None``: the data unchanged); at most ``max_size`` bytes when
    given. The whole string is checked first, so ``'gz:99'`` is refused before any data is read.

    Raises:
        ValueError: ``text`` is not a valid compression string.
        ShardCorruptError: the data is corrupt, truncated, or expands past ``max_size``.
    """
    if text is None:
        return bytes(data)
    compressor, _ = parse_compression(text)
    return compressor.decompress(data, max_size)


def decompress_file(text: str, src_path: str, dst_path: str, max_size: int | None = None) -> int:
    """Decompress the file ``src_path`` into ``dst_path`` by the family of ``text``; at most ``max_size`` bytes when
    given. A compressor with a ``decompress_to(src, dst, max_size)`` method (gzip and bzip2 here) streams in
    bounded memory; for the others the compressed file is read and the output built in memory (it is bounded by
    ``max_size``). Returns the number of bytes written.

    Raises:
        ValueError: ``text`` is not a valid compression string.
        ShardCorruptError: the data is corrupt, truncated, or expands past ``max_size``.
    """
    compressor, _ = parse_compression(text)
    stream = getattr(compressor, 'decompress_to', None)
    with open(src_path, 'rb') as src, open(dst_path, 'wb') as dst:
        if stream is not None:
            return int(stream(src, dst, max_size))
        out = compressor.decompress(src.read(), max_size)
        dst.write(out)
        return len(out)


def decompress_part(compression: str | None, zip_path: str, raw_path: str, raw: Any,
                    guard: Callable[[], AbstractContextManager[Any]] | None = None) -> None:
    """Decompress a shard's compressed file ``zip_path`` into ``raw_path`` through a temporary file, a chunk at a time
    where the compressor streams (gzip, bzip2), bounded by the raw size the index declares (``raw``: the raw file's
    entry, with ``bytes`` and ``basename``; None when unknown) and renamed into place only when complete, inside
    ``guard`` when given (as :func:`~streaming_core.storage.facade.download_file`'s).

    Raises:
        ShardCorruptError: the file does not decompress, or not to the declared size (naming the file).
    """
    import os
    import shutil

    from streaming_core.errors import ShardCorruptError
    from streaming_core.storage.facade import temp_name
    tmp = temp_name(raw_path)
    try:
        try:
            if compression is None:
                shutil.copyfile(zip_path, tmp)
                written = os.path.getsize(tmp)
            else:
                bound = raw.bytes if raw is not None else None
                written = decompress_file(compression, zip_path, tmp, max_size=bound)
        except ShardCorruptError as err:
            raise ShardCorruptError(f'{zip_path}: {err}') from err
        if raw is not None and written != raw.bytes:
            raise ShardCorruptError(f'{zip_path} decompresses to {written} bytes, but the index declares '
                                    f'{raw.bytes} for {raw.basename}.')
        with guard() if guard is not None else nullcontext():
            os.replace(tmp, raw_path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
