"""Resolving MDS encoding strings (``'int'``, ``'ndarray:uint8:32,32,3'``, ``'my_codec:args'``) to codecs.

The name before the first ``:`` is looked up in the ``codec`` registry (so any plugin can add encodings through
:func:`streaming_core.hookspecs.register_codecs`); the rest is passed to the registered factory. Resolution is
cached per string and registry generation, so registering, overriding or removing codecs at run time takes effect
at once.
"""

from __future__ import annotations

import functools
from typing import Any

from streaming_core import plugin_api
from streaming_core.plugin_api import Codec, CodecError, UnknownNameError
from streaming_mds.encodings import UnknownEncodingError

__all__ = ['get_codec', 'clear_codec_cache', 'is_mds_encoding', 'get_mds_encodings', 'get_mds_encoded_size',
           'mds_encode', 'mds_decode', 'is_mds_encoding_safe']


def _codecs() -> Any:
    # Looked up when first used: importing streaming_mds then does not import the plugin host (issue 14's import
    # row), and a test's injected host is honoured.
    return plugin_api.get_registry('codec')


def get_codec(encoding: str) -> Codec:
    """The codec for an encoding string (cached).

    Raises:
        UnknownEncodingError: no plugin registers the name before the first ``:`` (with an install hint).
        CodecError: the string is empty, or the factory refuses its arguments (``'str:x'``, ``'ndarray:bool'``).
    """
    if not isinstance(encoding, str) or not encoding:
        raise CodecError(f'An MDS encoding must be a non-empty string such as "bytes" or "ndarray:uint8", got '
                         f'{encoding!r}.')
    registry = _codecs()
    _ = encoding.partition(':')[0] in registry  # loads the plugin providing it, so the generation below is settled
    return _resolve(encoding, registry.generation)


@functools.lru_cache(maxsize=4096)
def _resolve(encoding: str, generation: int) -> Codec:
    name, _, args = encoding.partition(':')
    try:
        factory = _codecs().get(name)
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]  # the registry's headline says what ours says
        error = UnknownEncodingError('\n'.join(filter(None, [f'Unsupported MDS encoding {encoding!r}.', hint])))
        error.hint = hint
        raise error from None
    try:
        codec = factory(args or None)
    except CodecError:
        raise
    except (TypeError, ValueError) as err:
        raise CodecError(f'MDS encoding {encoding!r} is malformed: {err}') from err
    size = getattr(codec, 'size', None)
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise CodecError(f'The codec registered for {name!r} reports size {size!r}; a fixed size must be a positive '
                         f'int (or None for variable size).')
    return codec


def clear_codec_cache() -> None:
    """Forget every resolved encoding string."""
    _resolve.cache_clear()


def is_mds_encoding(encoding: Any) -> bool:
    """Whether ``encoding`` resolves to a codec (``''``, ``'pngg'``, ``'str:x'`` do not)."""
    try:
        get_codec(encoding)
    except (CodecError, UnknownNameError):
        return False
    return True


def is_mds_encoding_safe(encoding: str) -> bool:
    """Whether decoding ``encoding`` cannot execute code (every builtin except ``pkl``)."""
    return not getattr(get_codec(encoding), 'unsafe', False)


def get_mds_encodings() -> set[str]:
    """The registered encoding names (the 28 builtin ones plus any a plugin adds)."""
    return set(_codecs().names())


def get_mds_encoded_size(encoding: str) -> int | None:
    """The fixed encoded size of ``encoding``, or ``None`` when it varies."""
    return get_codec(encoding).size


def mds_encode(encoding: str, obj: Any) -> bytes:
    """Encode ``obj``; a value that is already ``bytes`` is returned unchanged, whatever the encoding."""
    if isinstance(obj, bytes):
        return obj
    return get_codec(encoding).encode(obj)


def mds_decode(encoding: str, data: bytes | memoryview) -> Any:
    """Decode one value."""
    return get_codec(encoding).decode(data)
