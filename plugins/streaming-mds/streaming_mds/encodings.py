"""The non-image MDS column encodings: ``bytes``, ``str``, ``int``, the numpy scalars, ``str_int``, ``str_float``,
``str_decimal``, ``json`` and the unsafe ``pkl``.

Each class is a codec factory as :func:`streaming_core.hookspecs.register_codecs` expects: ``Cls(args)`` where
``args`` is the text after the encoding name's first ``:`` (these take none). Byte layouts follow the reference
(spec 4.1): little-endian numbers, UTF-8 text, pyjson for ``json``.
"""

from __future__ import annotations

import json
import pickle
import sys
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from streaming_core.plugin_api import CodecError, ColumnTypeError, UnknownNameError

__all__ = ['EncodingTypeError', 'EncodingOverflowError', 'UnknownEncodingError', 'Encoding', 'Bytes', 'Str', 'Int',
           'Scalar', 'StrInt', 'StrFloat', 'StrDecimal', 'Pickle', 'JSON', 'SCALAR_TYPES', 'scalar_factory',
           'short_repr']


class EncodingTypeError(ColumnTypeError):
    """A column value has a type its encoding does not take (a :class:`~streaming_core.errors.ColumnTypeError`:
    also a ``TypeError``, and an ``AttributeError`` as the reference's encoders raise).

    Args:
        message: The whole message.
        takes: What the encoding takes (``'int'``, ``'a numpy ndarray'``), so a writer can word one message naming
            the column (``Column 'label' is declared 'int' (which takes int), but the value is str: 'cat'.``).
    """

    def __init__(self, message: str, takes: str | None = None) -> None:
        super().__init__(message)
        self.takes = takes


class EncodingOverflowError(CodecError, OverflowError):
    """A number does not fit the encoding's integer type."""


class UnknownEncodingError(UnknownNameError, TypeError):
    """An MDS column names an encoding that no installed plugin registers (or a malformed encoding string).

    Attributes:
        hint: The registry's explanation without its headline (a close match, the installed names, what to
            install), so a caller that words its own headline does not repeat it.
    """

    hint: str = ''


class Encoding:
    """Base of the builtin codecs: no arguments, variable size, safe to decode."""

    name: str = ''
    size: int | None = None
    unsafe: bool = False

    def __init__(self, args: str | None = None) -> None:
        if args:
            raise CodecError(f'MDS encoding {self.name!r} takes no arguments, got {self.name}:{args}. Use '
                             f'{self.name!r} alone.')

    def encode(self, obj: Any) -> bytes:
        """Encode one value (override)."""
        raise NotImplementedError

    def decode(self, data: bytes | memoryview) -> Any:
        """Decode one value (override)."""
        raise NotImplementedError

    def _wrong_type(self, obj: Any, expected: str) -> EncodingTypeError:
        return EncodingTypeError(f'MDS encoding {self.name!r} takes {expected}, got {type(obj).__name__}: '
                                 f'{short_repr(obj)}.', expected)

    def __repr__(self) -> str:
        return f'<MDS encoding {self.name}>'


def short_repr(obj: Any) -> str:
    """``repr(obj)``, cut to 60 characters (for error messages)."""
    try:
        text = repr(obj)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f'<{type(obj).__name__} object>'
    return text if len(text) <= 60 else text[:57] + '...'


class Bytes(Encoding):
    """``bytes``: stored unchanged; decodes to ``bytes``."""

    name = 'bytes'

    def encode(self, obj: Any) -> bytes:
        """Return the bytes (``bytearray`` and ``memoryview`` are copied into ``bytes``)."""
        if isinstance(obj, bytes):
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise self._wrong_type(obj, 'bytes')

    def decode(self, data: bytes | memoryview) -> bytes:
        """Return ``bytes``."""
        return bytes(data)


class Str(Encoding):
    """``str``: UTF-8."""

    name = 'str'

    def encode(self, obj: Any) -> bytes:
        """UTF-8 of the string."""
        if not isinstance(obj, str):
            raise self._wrong_type(obj, 'str')
        try:
            return obj.encode('utf-8')
        except UnicodeEncodeError as err:
            raise CodecError(f'MDS encoding \'str\' cannot encode {short_repr(obj)} as UTF-8: {err}') from err

    def decode(self, data: bytes | memoryview) -> str:
        """Decode UTF-8."""
        return str(data, 'utf-8')


class Int(Encoding):
    """``int``: a Python (or numpy) integer as 8 little-endian two's-complement bytes; decodes to ``int``."""

    name = 'int'
    size = 8

    def encode(self, obj: Any) -> bytes:
        """Eight little-endian bytes."""
        if not isinstance(obj, (int, np.integer)):
            raise self._wrong_type(obj, 'int')
        try:
            return int(obj).to_bytes(8, 'little', signed=True)
        except OverflowError as err:
            raise EncodingOverflowError(f'MDS encoding \'int\' stores a signed 64-bit integer; {obj} is out of '
                                        f'range. Use \'str_int\' for larger integers.') from err

    def decode(self, data: bytes | memoryview) -> int:
        """The Python ``int``."""
        return int.from_bytes(data, 'little', signed=True)


#: The numpy scalar encodings and their little-endian dtypes.
SCALAR_TYPES = {'uint8': '<u1', 'uint16': '<u2', 'uint32': '<u4', 'uint64': '<u8', 'int8': '<i1', 'int16': '<i2',
                'int32': '<i4', 'int64': '<i8', 'float16': '<f2', 'float32': '<f4', 'float64': '<f8'}

_LITTLE = sys.byteorder == 'little'


class Scalar(Encoding):
    """A numpy scalar encoding (``uint8`` ... ``float64``): fixed size, little-endian; decodes to a numpy scalar.

    Any value the numpy scalar constructor accepts is taken; an integer out of range raises
    :class:`EncodingOverflowError`.
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        super().__init__(args)
        self.dtype = np.dtype(SCALAR_TYPES[name])
        self.size = self.dtype.itemsize
        self._type = self.dtype.type

    def encode(self, obj: Any) -> bytes:
        """The little-endian bytes of ``dtype(obj)``."""
        try:
            value = self._type(obj)
        except OverflowError as err:
            raise EncodingOverflowError(f'MDS encoding {self.name!r}: {short_repr(obj)} is out of range.') from err
        except (TypeError, ValueError) as err:
            raise EncodingTypeError(f'MDS encoding {self.name!r} cannot convert {type(obj).__name__} '
                                    f'{short_repr(obj)}: {err}', f'a number numpy converts to {self.name}') from err
        return value.tobytes() if _LITTLE else np.asarray(value, self.dtype).tobytes()

    def decode(self, data: bytes | memoryview) -> Any:
        """The numpy scalar."""
        return np.frombuffer(data, self.dtype)[0]


def scalar_factory(name: str) -> Any:
    """The codec factory for the numpy scalar encoding ``name``."""

    def factory(args: str | None = None) -> Scalar:
        return Scalar(name, args)

    factory.__name__ = f'{name}_codec'
    factory.__doc__ = f'Codec factory of the MDS encoding {name!r}.'
    return factory


class StrInt(Encoding):
    """``str_int``: an ``int`` as its decimal text."""

    name = 'str_int'

    def encode(self, obj: Any) -> bytes:
        """``str(obj)`` in UTF-8."""
        if not isinstance(obj, (int, np.integer)):
            raise self._wrong_type(obj, 'int')
        return str(int(obj)).encode('utf-8')

    def decode(self, data: bytes | memoryview) -> int:
        """``int(text)``."""
        return int(str(data, 'utf-8'))


class StrFloat(Encoding):
    """``str_float``: a ``float`` as Python's shortest repr (``42.0``, ``1e+16``, ``nan``)."""

    name = 'str_float'

    def encode(self, obj: Any) -> bytes:
        """``str(obj)`` in UTF-8 (an ``int`` is refused, as in the reference)."""
        if not isinstance(obj, float):
            raise self._wrong_type(obj, 'float')
        return str(float(obj)).encode('utf-8')

    def decode(self, data: bytes | memoryview) -> float:
        """``float(text)``."""
        return float(str(data, 'utf-8'))


class StrDecimal(Encoding):
    """``str_decimal``: a ``decimal.Decimal`` as its text (``4E+15``, ``1.10``)."""

    name = 'str_decimal'

    def encode(self, obj: Any) -> bytes:
        """``str(obj)`` in UTF-8."""
        if not isinstance(obj, Decimal):
            raise self._wrong_type(obj, 'decimal.Decimal')
        return str(obj).encode('utf-8')

    def decode(self, data: bytes | memoryview) -> Decimal:
        """``Decimal(text)``."""
        try:
            return Decimal(str(data, 'utf-8'))
        except InvalidOperation as err:
            raise CodecError(f'MDS encoding \'str_decimal\': {bytes(data)[:40]!r} is not a decimal.') from err


class Pickle(Encoding):
    """``pkl`` (UNSAFE): ``pickle.dumps`` with the interpreter's default protocol.

    Decoding runs arbitrary code from the file, so readers refuse a ``pkl`` column unless the dataset is opened
    with ``allow_unsafe_types=True``.
    """

    name = 'pkl'
    unsafe = True

    def encode(self, obj: Any) -> bytes:
        """``pickle.dumps(obj)``."""
        try:
            return pickle.dumps(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise CodecError(f'MDS encoding \'pkl\' cannot pickle {type(obj).__name__}: {err}') from err

    def decode(self, data: bytes | memoryview) -> Any:
        """``pickle.loads(data)``."""
        return pickle.loads(data)


class JSON(Encoding):
    """``json``: pyjson text (keys not sorted); a top-level ``np.ndarray`` is stored as its ``tolist()``."""

    name = 'json'

    def encode(self, obj: Any) -> bytes:
        """``json.dumps(obj)`` in UTF-8."""
        if isinstance(obj, np.ndarray):
            obj = obj.tolist()
        try:
            return json.dumps(obj).encode('utf-8')
        except (TypeError, ValueError) as err:
            raise CodecError(f'MDS encoding \'json\' cannot serialise {type(obj).__name__}: {err}') from err

    def decode(self, data: bytes | memoryview) -> Any:
        """``json.loads``."""
        return json.loads(bytes(data))
