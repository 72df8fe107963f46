"""The non-image MDS column encodings: ``bytes``, ``str``, ``int``, the numpy scalars, ``str_int``, ``str_float``,
``str_decimal``, ``json`` and the unsafe ``pkl``.

Each class is a codec factory as :func:`streaming_core.hookspecs.register_codecs` expects: ``Cls(args)`` where
``args`` is the text after the encoding name's first ``:`` (these take none). Byte layouts follow the reference
(spec 4.1): little-endian numbers, UTF-8 text, pyjson for ``json``.
"""

from __future__ import annotations

import json
import pickle
import struct
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from streaming_core.plugin_api import CodecError, ColumnTypeError, SampleSizeError, UnknownNameError

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

#: The ``struct`` format of each numpy scalar encoding: the same bytes as numpy's, and a range check numpy's casts
#: between its own types do not make (``np.uint8(np.int64(300))`` is 44, ``np.float16(1e5)`` is inf).
_STRUCT_FORMATS = {'uint8': '<B', 'uint16': '<H', 'uint32': '<I', 'uint64': '<Q', 'int8': '<b', 'int16': '<h',
                   'int32': '<i', 'int64': '<q', 'float16': '<e', 'float32': '<f', 'float64': '<d'}


def _pack_half(value: float) -> bytes:
    """``float16`` bytes; a NaN goes through numpy, which keeps its payload bits as the reference does."""
    return _HALF(value) if value == value else np.float16(value).tobytes()


_HALF = struct.Struct('<e').pack


class Scalar(Encoding):
    """A numpy scalar encoding (``uint8`` ... ``float64``): fixed size, little-endian; decodes to a numpy scalar.

    Takes a Python or numpy number (``bool`` included), a one-element array or sequence, or anything ``int()``
    (integer encodings) or ``float()`` (float encodings) converts, such as the text ``'5'``; as the reference's numpy
    constructor, ``None`` in a float encoding is NaN and a ``numpy.datetime64``/``timedelta64`` in an integer one is
    its count of units. The value must be
    representable: an integer out of range, or a finite number that would round to infinity, raises
    :class:`EncodingOverflowError`; a float that is not integral (``3.7``, ``nan``) for an integer encoding raises
    :class:`EncodingTypeError`.
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        super().__init__(args)
        self.dtype = np.dtype(SCALAR_TYPES[name])
        self.size = self.dtype.itemsize
        self._type = self.dtype.type
        self._integral = self.dtype.kind in 'iu'
        #: The class packed without conversion besides ``int``: ``float`` for float encodings.
        self._plain = int if self._integral else float
        self._pack = _pack_half if name == 'float16' else struct.Struct(_STRUCT_FORMATS[name]).pack

    def encode(self, obj: Any) -> bytes:
        """The little-endian bytes of the value (see the class docstring)."""
        value = obj.item() if isinstance(obj, np.generic) else obj  # numpy's casts wrap; struct's range-check
        cls = value.__class__
        if cls is int or cls is self._plain:
            try:
                return self._pack(value)
            except (struct.error, OverflowError):
                raise self._out_of_range(obj) from None
        return self._encode_converted(obj)

    def _encode_converted(self, obj: Any) -> bytes:
        """:meth:`encode` of any value but an ``int`` (or a ``float`` for float encodings)."""
        original = obj
        if obj is None and not self._integral:  # the reference's numpy constructor: a missing float is NaN
            return self._pack(float('nan'))
        if isinstance(obj, (list, tuple)):
            try:
                obj = np.asarray(obj)
            except (TypeError, ValueError) as err:
                raise EncodingTypeError(f'MDS encoding {self.name!r} takes one number, got {short_repr(original)}: '
                                        f'{err}', f'a number numpy converts to {self.name}') from err
        if isinstance(obj, (np.generic, np.ndarray)):
            if obj.size != 1:  # the reference's error for it (a KeyError): its bytes have the wrong size
                raise SampleSizeError(f'Unexpected data size; was this data typed with the correct encoding '
                                      f'({self.name})? It takes one number, got an array of shape {obj.shape}.')
            if obj.dtype.kind in 'mM' and self._integral:  # a datetime or duration: its count of units, as numpy
                obj = obj.astype(np.int64)
            obj = obj.item()  # a Python number: numpy casts between its own types wrap instead of raising
        try:
            number = int(obj) if self._integral else float(obj)
        except OverflowError:
            raise self._out_of_range(original) from None
        except (TypeError, ValueError) as err:
            raise EncodingTypeError(f'MDS encoding {self.name!r} cannot convert {type(original).__name__} '
                                    f'{short_repr(original)}: {err}', f'a number numpy converts to {self.name}') \
                from err
        if self._integral and not isinstance(obj, (int, str, bytes)) and number != obj:
            raise EncodingTypeError(f'MDS encoding {self.name!r} stores integers; {short_repr(original)} is not one. '
                                    f'Round it first.', f'an integer ({self.name})')
        try:
            return self._pack(number)
        except (struct.error, OverflowError):
            raise self._out_of_range(original) from None

    def _out_of_range(self, obj: Any) -> EncodingOverflowError:
        if self._integral:
            info = np.iinfo(self.dtype)
            bounds = f'{info.min} to {info.max}'
        else:
            bounds = f'finite values up to {float(np.finfo(self.dtype).max):g} in magnitude'
        return EncodingOverflowError(f'MDS encoding {self.name!r}: {short_repr(obj)} is out of range ({bounds}).')

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
