"""Spark types to MDS encodings for :func:`streaming_core.tools.spark.dataframe_to_mds`, and the per-column conversion
of the pandas values each task receives.

Mapping (the reference's, spec formats.md 7.5), with its gaps fixed:

==============================================  ==============================================================
Spark type                                      MDS encoding
==============================================  ==============================================================
Byte, Short                                     ``uint8``, ``uint16`` (unsigned, as upstream)
Integer, Long                                   ``int32``, ``int64``
Float, Double                                   ``float32``, ``float64``
Decimal (any precision)                         ``str_decimal``
String                                          ``str``
Binary                                          ``bytes``
Array of Byte/Short/Integer/Long/Float/Double   ``ndarray:int8`` / ``:int16`` / ``:int32`` / ``:int64`` /
                                                ``:float32`` / ``:float64``, whether or not the array type is
                                                nullable (MS#870), and for nested arrays too: an
                                                ``Array(Array(Integer))`` column holds 2-D ``int32`` arrays (MS#736);
                                                ragged nested arrays are refused with the row named
Boolean, Timestamp, Date, intervals, ...        unsupported: ``ValueError`` (cast the column first)
==============================================  ==============================================================

User-given ``columns`` are checked against the schema: integral columns accept any integer encoding (``int``,
``int8`` ... ``uint64``, ``str_int``), floating columns ``float16/32/64`` and ``str_float``, Decimal
``str_decimal``, String ``str``, Binary ``bytes``, ``pil``, ``png``, ``jpeg`` and ``pkl``; ``ndarray[:dtype[:shape]]``
needs a numeric Array of that dtype (checked as ``ndarray:dtype``); ``json`` needs a string, number, boolean or
null, or a Struct, Array or Map (string keys) built from them. Anything else raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import numpy as np

from streaming_core.errors import CodecError

__all__ = ['spark_encoding', 'infer_spark_columns', 'check_spark_columns', 'value_converter', 'json_compatible']

_INT_ENCODINGS = {'int', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'str_int'}
_FLOAT_ENCODINGS = {'float16', 'float32', 'float64', 'str_float'}
_BINARY_ENCODINGS = {'bytes', 'pil', 'png', 'jpeg', 'pkl'}


def _types() -> Any:
    from pyspark.sql import types
    return types


def _scalar_encoding(dtype: Any) -> str | None:
    t = _types()
    table = [(t.ByteType, 'uint8'), (t.ShortType, 'uint16'), (t.IntegerType, 'int32'), (t.LongType, 'int64'),
             (t.FloatType, 'float32'), (t.DoubleType, 'float64'), (t.DecimalType, 'str_decimal'),
             (t.StringType, 'str'), (t.BinaryType, 'bytes')]
    for kind, encoding in table:
        if isinstance(dtype, kind):
            return encoding
    return None


def _array_dtype(dtype: Any) -> str | None:
    """The element dtype of a (possibly nested) numeric Array type, else None."""
    t = _types()
    while isinstance(dtype, t.ArrayType):
        dtype = dtype.elementType
    table = [(t.ByteType, 'int8'), (t.ShortType, 'int16'), (t.IntegerType, 'int32'), (t.LongType, 'int64'),
             (t.FloatType, 'float32'), (t.DoubleType, 'float64')]
    for kind, name in table:
        if isinstance(dtype, kind):
            return name
    return None


def spark_encoding(dtype: Any, column: str) -> str:
    """The MDS encoding of a Spark type (see the module docstring).

    Raises:
        ValueError: an unsupported type, naming the column and what to do.
    """
    t = _types()
    if isinstance(dtype, t.ArrayType):
        element = _array_dtype(dtype)
        if element is None:
            raise ValueError(f'Column {column!r}: Spark type {dtype.simpleString()} is not supported: only arrays of '
                             f'numbers map to ndarray. Give mds_kwargs["columns"] with "json" for it, or drop it.')
        return f'ndarray:{element}'
    encoding = _scalar_encoding(dtype)
    if encoding is None:
        raise ValueError(f'Column {column!r}: Spark type {dtype.simpleString()} is not supported by MDS. Cast it '
                         f'(for example a boolean to int or a timestamp to string) or drop it before '
                         f'dataframe_to_mds.')
    return encoding


def infer_spark_columns(schema: Any) -> dict[str, str]:
    """``{column: encoding}`` for every field of a Spark schema."""
    return {field.name: spark_encoding(field.dataType, field.name) for field in schema.fields}


def json_compatible(dtype: Any) -> bool:
    """Whether a Spark type can be stored in a ``json`` column: a string, number, boolean or null, or a Struct, Array
    or Map built from them (as the reference; but a Map's keys must be strings here, because JSON would turn other
    keys into strings, silently).

    Args:
        dtype: A ``pyspark.sql.types`` data type.
    """
    t = _types()
    if isinstance(dtype, t.StructType):
        return all(json_compatible(f.dataType) for f in dtype.fields)
    if isinstance(dtype, t.ArrayType):
        return json_compatible(dtype.elementType)
    if isinstance(dtype, t.MapType):
        return isinstance(dtype.keyType, t.StringType) and json_compatible(dtype.valueType)
    simple = (t.StringType, t.IntegerType, t.LongType, t.ShortType, t.ByteType, t.FloatType, t.DoubleType,
              t.BooleanType, t.NullType)
    return isinstance(dtype, simple)


#: The old private name of :func:`json_compatible`, kept for callers that used it.
_json_compatible = json_compatible


def check_spark_columns(schema: Any, columns: Mapping[str, str]) -> None:
    """Check user-given ``columns`` against the DataFrame schema (see the module docstring).

    Raises:
        ValueError: a column that is not in the schema, or an encoding its type cannot provide.
    """
    from streaming_core.tools.convert.columns import check_encoding
    t = _types()
    fields = {field.name: field.dataType for field in schema.fields}
    for name, encoding in columns.items():
        if name not in fields:
            raise ValueError(f'Column {name!r} of mds_kwargs["columns"] is not in the DataFrame (its columns: '
                             f'{", ".join(fields)}).')
        if not isinstance(encoding, str) or not encoding:
            raise ValueError(f'Column {name!r}: the encoding must be a non-empty string, got {encoding!r}.')
        try:
            check_encoding(encoding, name)
        except LookupError as err:
            raise ValueError(str(err)) from None
        dtype = fields[name]
        base = encoding.partition(':')[0]
        shown = dtype.simpleString()
        if base == 'ndarray':
            element = _array_dtype(dtype) if isinstance(dtype, t.ArrayType) else None
            wanted = encoding.split(':')[1] if encoding.count(':') >= 1 else None
            if element is None or (wanted and wanted != element):
                expect = f'ndarray:{element}' if element else 'an encoding other than ndarray'
                raise ValueError(f'Column {name!r} has Spark type {shown}, which cannot be written as {encoding!r} '
                                 f'(expected {expect}).')
            continue
        if base == 'json':
            if not json_compatible(dtype):
                raise ValueError(f'Column {name!r}: "json" needs strings, numbers, booleans and nulls, or a Struct, '
                                 f'Array or Map (string keys) of them; the column is {shown}.')
            continue
        mapped = _scalar_encoding(dtype)
        if mapped in ('uint8', 'uint16', 'int32', 'int64'):
            allowed = _INT_ENCODINGS
        elif mapped in ('float32', 'float64'):
            allowed = _FLOAT_ENCODINGS
        elif mapped == 'bytes':
            allowed = _BINARY_ENCODINGS
        else:
            allowed = {mapped} if mapped else set()
        if encoding not in allowed:
            raise ValueError(f'Column {name!r} has Spark type {shown}, which cannot be written as {encoding!r}'
                             f'{" (expected one of " + ", ".join(sorted(allowed)) + ")" if allowed else ""}.')


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _nested_list(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_nested_list(v) for v in value] if value.dtype == object else value.tolist()
    if isinstance(value, (list, tuple)):
        return [_nested_list(v) for v in value]
    return value


def _holds_none(value: Any) -> bool:
    return value is None or (isinstance(value, list) and any(_holds_none(item) for item in value))


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()] if value.dtype != object else [_jsonable(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, 'asDict'):  # a pyspark Row
        return _jsonable(value.asDict(recursive=True))
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def value_converter(encoding: str, column: str) -> Callable[[Any], Any]:
    """The function a task applies to a pandas value of ``column`` before writing it (nulls are refused, except
    NaN in float columns and nulls inside ``json`` values).
    """
    base, _, args = encoding.partition(':')
    null = CodecError(f'Column {column!r} holds a null, which MDS cannot store (encoding {encoding}). Fill or filter '
                      f'the nulls first (DataFrame.na.fill / dropna), or use a "json" column.')

    if base == 'ndarray':
        dtype = args.partition(':')[0] or None

        def to_array(value: Any) -> Any:
            if value is None:
                raise null
            if isinstance(value, np.ndarray) and value.dtype != object:
                return value.astype(dtype, copy=False) if dtype else value
            nested = _nested_list(value)
            if _holds_none(nested):  # numpy would make a float None a NaN, silently
                raise CodecError(f'Column {column!r}: {_short(value)} holds a null inside the array, which an ndarray '
                                 f'cannot store. Fill or filter the nulls first, or use a "json" column.')
            try:
                return np.array(nested, dtype=dtype)
            except (ValueError, TypeError) as err:
                raise CodecError(f'Column {column!r}: {_short(value)} cannot form a {dtype or ""} ndarray: nested '
                                 f'arrays must all have the same length and hold no nulls ({err}). Store ragged '
                                 f'arrays as "json".') from None
        return to_array
    if base == 'json':
        return _jsonable
    if encoding in _FLOAT_ENCODINGS:
        def to_float(value: Any) -> Any:
            if value is None:
                raise null
            return float(value)
        return to_float

    def checked(value: Any) -> Any:
        if _is_null(value):
            raise null
        if isinstance(value, bytearray):
            return bytes(value)
        if isinstance(value, Decimal) or encoding not in _INT_ENCODINGS:
            return value
        return int(value)
    return checked


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'
