"""Columns of a conversion: parsing ``--columns``, inferring encodings from sample values, adapting them to the
output format, and coercing source values to what each encoding's writer accepts.

Inference rules (from the first :data:`INFER_RECORDS` records of the source, for JSON-lines and Python values):

========================================================  ===============
values seen in the column                                 MDS encoding
========================================================  ===============
only ``int`` (not ``bool``)                               ``int``
``float``, or ``int`` and ``float`` mixed                 ``float64``
only ``str``                                              ``str``
only ``bytes``                                            ``bytes``
anything else: ``bool``, ``None``, lists, objects, mixed  ``json``
types, or a key missing from some records
========================================================  ===============

CSV values are text: a column whose sampled values are all plain decimal integers (ASCII digits with an optional
sign, no leading zero: ``007`` is an identifier) is ``int``, all decimal numbers (also with a fraction or an
exponent, or ``nan``, ``inf``, ``-inf`` in any letter case) ``float64``, else ``str``. Python-only syntax
(``1_000``, surrounding spaces, non-ASCII digits) stays text. Parquet columns follow their Arrow type (see
:mod:`streaming_core.tools.convert.parquet`).

The ``json``, ``csv`` and ``tsv`` formats store only ``str``, ``int`` and ``float`` columns; MDS integer encodings
become ``int``, float encodings ``float`` and ``str`` stays ``str``. Any other column is refused with a message
that names it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np

from streaming_core.errors import CodecError

__all__ = ['INFER_RECORDS', 'INT_ENCODINGS', 'FLOAT_ENCODINGS', 'TEXT_FORMATS', 'parse_columns', 'infer_value_columns',
           'infer_text_columns', 'select_columns', 'adapt_columns', 'check_encoding', 'coercer', 'Coercer']

#: Records read from the start of a source to infer its columns.
INFER_RECORDS = 1000
INT_ENCODINGS = frozenset({'int', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64',
                           'str_int'})
FLOAT_ENCODINGS = frozenset({'float16', 'float32', 'float64', 'str_float', 'str_decimal'})
#: Output formats whose writers take only ``str``/``int``/``float`` columns.
TEXT_FORMATS = ('json', 'csv', 'tsv')

Coercer = Callable[[Any], Any]


def parse_columns(specs: str | Sequence[str] | None) -> dict[str, str | None] | None:
    """Parse ``--columns`` text: ``name:encoding`` items separated by commas (the option may repeat).

    A name without an encoding keeps its inferred encoding. Commas inside an encoding (the shape of
    ``ndarray:uint8:32,32,3``) are kept: a piece with no ``:`` after the first item continues the previous one.

    Returns:
        ``{name: encoding or None}`` in the given order, or None when nothing was given.

    Raises:
        ValueError: an empty name or a name given twice.
    """
    if specs is None:
        return None
    items = [specs] if isinstance(specs, str) else list(specs)
    result: dict[str, str | None] = {}
    for text in items:
        pieces: list[str] = []
        for piece in text.split(','):
            piece = piece.strip()
            if not piece:
                continue
            if pieces and piece.isdigit() and _has_shape(pieces[-1]):
                pieces[-1] += ',' + piece  # a shape dimension of the previous ndarray encoding
            else:
                pieces.append(piece)
        for piece in pieces:
            name, sep, encoding = piece.partition(':')
            name = name.strip()
            if not name:
                raise ValueError(f'Invalid --columns item {piece!r}: expected NAME or NAME:ENCODING (for example '
                                 f'"label:int" or "image:jpeg").')
            if name in result:
                raise ValueError(f'Column {name!r} is given twice in --columns.')
            result[name] = (encoding.strip() or None) if sep else None
    return result or None


def _has_shape(item: str) -> bool:
    encoding = item.partition(':')[2]
    return encoding.startswith('ndarray:') and encoding.count(':') == 2


def _value_kind(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return 'other'
    if isinstance(value, (int, np.integer)):
        return 'int'
    if isinstance(value, (float, np.floating)):
        return 'float'
    if isinstance(value, str):
        return 'str'
    if isinstance(value, (bytes, bytearray, memoryview)):
        return 'bytes'
    return 'other'


def infer_value_columns(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Infer MDS encodings from Python records (JSON-lines objects) with the rules of the module docstring.

    Columns are returned in order of first appearance.

    Raises:
        ValueError: no record was given (an empty source), or a record is not an object.
    """
    kinds: dict[str, set[str]] = {}
    count = 0
    for record in records:
        if not isinstance(record, Mapping):
            raise ValueError(f'Record {count} is a {type(record).__name__}, not an object: every JSON line must be '
                             f'an object such as {{"text": "...", "label": 1}}.')
        count += 1
        for key in kinds.keys() - record.keys():
            kinds[key].add('missing')
        for key, value in record.items():
            seen = kinds.get(key)
            if seen is None:
                seen = kinds[key] = {'missing'} if count > 1 else set()
            seen.add(_value_kind(value))
    if not count:
        raise ValueError('The source holds no records, so its columns cannot be inferred (and there is nothing to '
                         'convert).')
    result = {}
    for key, seen in kinds.items():
        if seen == {'int'}:
            result[key] = 'int'
        elif seen and seen <= {'int', 'float'}:
            result[key] = 'float64'
        elif seen == {'str'}:
            result[key] = 'str'
        elif seen == {'bytes'}:
            result[key] = 'bytes'
        else:
            result[key] = 'json'
    return result


_DIGITS = r'(?:0|[1-9][0-9]*)'
_INFER_INT = re.compile(rf'[+-]?{_DIGITS}')
_INFER_FLOAT = re.compile(rf'[+-]?(?:{_DIGITS}(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?')
_INT_TEXT = re.compile(r'[+-]?[0-9]+')
_FLOAT_TEXT = re.compile(r'[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?')
_FLOAT_WORDS = re.compile(r'[+-]?(?:nan|inf|infinity)', re.IGNORECASE)


def _infers_float(value: str) -> bool:
    return _INFER_FLOAT.fullmatch(value) is not None or _FLOAT_WORDS.fullmatch(value) is not None


def infer_text_columns(header: Sequence[str], rows: Iterable[Sequence[str]]) -> dict[str, str]:
    """Infer encodings of CSV columns: all plain decimal integers -> ``int``, all decimal numbers -> ``float64``,
    else ``str`` (see the module docstring)."""
    ints = [True] * len(header)
    floats = [True] * len(header)
    for row in rows:
        for i, value in enumerate(row[:len(header)]):
            if ints[i] and _INFER_INT.fullmatch(value) is None:
                ints[i] = False
            if floats[i] and not ints[i] and not _infers_float(value):
                floats[i] = False
    return {name: 'int' if ints[i] else 'float64' if floats[i] else 'str' for i, name in enumerate(header)}


def select_columns(inferred: Mapping[str, str], given: Mapping[str, str | None] | None,
                   where: str) -> dict[str, str]:
    """The columns to write: all inferred ones, or exactly the given ones (a given ``None`` keeps the inferred
    encoding).

    Raises:
        ValueError: a given column without an encoding that the source does not have.
    """
    if not given:
        return dict(inferred)
    result = {}
    for name, encoding in given.items():
        if encoding is None:
            if name not in inferred:
                raise ValueError(f'Column {name!r} is not in {where} (its columns: {", ".join(inferred) or "none"}); '
                                 f'give its encoding as {name}:ENCODING or choose another column.')
            encoding = inferred[name]
        result[name] = encoding
    return result


def check_encoding(encoding: str, column: str) -> None:
    """Resolve an MDS encoding string through the codec registry, with a message naming the column.

    Raises:
        UnknownNameError: no installed plugin provides the encoding.
        CodecError: the encoding's arguments are malformed.
    """
    from streaming_core.errors import UnknownNameError
    from streaming_core.machinery.lookup import get_registry
    name, _, args = encoding.partition(':')
    try:
        factory = get_registry('codec').get(name)
    except UnknownNameError as err:
        hint = str(err).partition('\n')[2]  # the registry's headline would say the same again
        raise UnknownNameError(f'Column {column!r}: unknown encoding {encoding!r}.\n{hint}') from None
    try:
        factory(args or None)
    except (TypeError, ValueError) as err:
        raise CodecError(f'Column {column!r}: encoding {encoding!r} is malformed: {err}') from err


def adapt_columns(columns: Mapping[str, str], fmt: str) -> dict[str, str]:
    """The columns as the writer of ``fmt`` takes them (MDS unchanged; text formats ``str``/``int``/``float``).

    Raises:
        ValueError: a column whose values the text format cannot store.
    """
    if fmt not in TEXT_FORMATS:
        return dict(columns)
    result = {}
    for name, encoding in columns.items():
        if encoding in ('str', 'int', 'float'):
            result[name] = encoding
        elif encoding in INT_ENCODINGS and encoding != 'str_int':
            result[name] = 'int'
        elif encoding in FLOAT_ENCODINGS and not encoding.startswith('str_'):
            result[name] = 'float'
        else:
            raise ValueError(f'The {fmt} format stores only str, int and float columns, but column {name!r} is '
                             f'{encoding}. Leave it out with --columns, give it one of those types, or write MDS.')
    return result


def _int_coercer(encoding: str) -> Coercer:
    """Text with decimal digits, integers and integral floats to ``int``, checked against the dtype's range."""
    limits = np.iinfo(encoding) if encoding.startswith(('int', 'uint')) and encoding != 'int' else None

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if _INT_TEXT.fullmatch(text) is None:
                raise ValueError(f'{value!r} is not a decimal integer')
            value = int(text)
        elif isinstance(value, np.integer):
            value = int(value)
        elif isinstance(value, (float, np.floating)):
            if not float(value).is_integer():
                raise ValueError(f'{value!r} is not an integer')
            value = int(value)
        if limits is not None and isinstance(value, int) and not limits.min <= value <= limits.max:
            raise ValueError(f'{value} is out of the range of {encoding} ({limits.min} to {limits.max})')
        return value
    return convert


def _float_coercer(encoding: str) -> Coercer:
    """Decimal text and numbers to ``float``; a finite value that would become infinite is refused."""
    dtype = np.dtype(encoding) if encoding in ('float16', 'float32') else None

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if _FLOAT_TEXT.fullmatch(text) is not None:
                finite = True
            elif _FLOAT_WORDS.fullmatch(text) is not None:
                finite = False
            else:
                raise ValueError(f'{value!r} is not a decimal number')
            number = float(text)
        elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            number = float(value)
            finite = math.isfinite(number)
        else:
            return value
        if finite:
            with np.errstate(over='ignore'):
                cast = float(dtype.type(number)) if dtype is not None else number
            if math.isinf(cast):
                largest = np.finfo(dtype or np.float64).max
                raise ValueError(f'{value!r} overflows {encoding} (largest {largest}) to infinity')
        return number
    return convert


def _to_decimal(value: Any) -> Any:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return Decimal(str(value).strip())
    return value


def _to_str(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode('utf-8')
    if hasattr(value, 'isoformat'):  # dates, times and timestamps
        return value.isoformat()
    return value


def _to_bytes(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode('utf-8')
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _has_null(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_null(item) for item in value)
    return value is None


def _cast_array(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` as ``dtype``, refusing what the cast would change: a fraction, a value out of an integer range, or
    a finite value becoming infinite.

    Raises:
        ValueError: naming the first such element.
    """
    kind = array.dtype.kind
    if dtype.kind in 'iu' and kind in 'iuf':
        if kind == 'f':
            fraction = ~np.isfinite(array) | (array != np.trunc(array))
            if fraction.any():
                _refuse(array, fraction, 'is not an integer')
        limits = np.iinfo(dtype)
        if array.size and (array.min().item() < limits.min or array.max().item() > limits.max):
            values = array.astype(object)
            _refuse(array, (values < limits.min) | (values > limits.max),
                    f'is out of the range of {dtype} ({limits.min} to {limits.max})')
    elif dtype.kind == 'f' and kind in 'iuf':
        with np.errstate(over='ignore'):
            cast = array.astype(dtype)
        overflow = np.isinf(cast) & np.isfinite(array.astype(np.float64))
        if overflow.any():
            _refuse(array, overflow, f'overflows {dtype} to infinity')
        return cast
    return array.astype(dtype)


def _refuse(array: np.ndarray, bad: np.ndarray, problem: str) -> None:
    index = [int(i) for i in np.argwhere(bad)[0]]
    raise ValueError(f'element {index} ({array[tuple(index)].item()!r}) {problem}')


def _ndarray(dtype: str | None, shape: tuple[int, ...] | None) -> Coercer:
    target = np.dtype(dtype) if dtype else None

    def convert(value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value)
        if _has_null(value):
            raise ValueError('the list holds a null; fill or drop the nulls first, or use the json encoding')
        array = np.asarray(value)
        if array.dtype == object:
            raise CodecError('nested lists of different lengths (or integers beyond 64 bits) cannot form an '
                             'ndarray; use the json encoding.')
        if target is not None and array.dtype != target:
            array = np.asarray(value, dtype=target) if array.dtype.kind in 'US' else _cast_array(array, target)
        if shape is not None and array.shape != shape:
            array = array.reshape(shape)
        return array
    return convert


def _json_text(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def coercer(encoding: str, *, text_source: bool = False) -> Coercer | None:
    """A function turning a source value into what the writer's encoding accepts, or None to pass it through.

    Args:
        encoding: The column's encoding (MDS, or ``str``/``int``/``float`` for the text formats).
        text_source: Values come from text (CSV): a ``json`` column parses its text as JSON.
    """
    name, _, args = encoding.partition(':')
    if encoding in INT_ENCODINGS:
        return _int_coercer(encoding)
    if encoding in ('float', 'float16', 'float32', 'float64', 'str_float'):
        return _float_coercer(encoding)
    if encoding == 'str_decimal':
        return _to_decimal
    if encoding == 'str':
        return _to_str
    if encoding == 'bytes':
        return _to_bytes
    if name == 'ndarray':
        dtype, _, shape_text = (args or '').partition(':')
        shape = tuple(int(d) for d in shape_text.split(',')) if shape_text else None
        return _ndarray(dtype or None, shape)
    if encoding == 'json' and text_source:
        return _json_text
    return None
