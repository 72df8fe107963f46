"""Exact JSON forms of sample values, shared by the reference venv and ours.

A value produced by a reader (or given to a writer) is turned into plain JSON that keeps everything comparing
equal must keep: ``1``, ``1.0`` and ``True`` stay distinct, numpy scalars keep their dtype and bytes, arrays keep
dtype, shape and C-order bytes, images keep mode, size, raw pixels and their file format, ``Decimal`` keeps its
text, non-finite floats and ``bytes`` are tagged. :func:`decode` rebuilds the Python value (used to feed writers
the same inputs on both sides); :func:`canonical` gives the text two values are compared by.

Only numpy and (for images) Pillow are needed, so this module runs unchanged in either virtualenv.
"""

from __future__ import annotations

import base64
import decimal
import json
import math
from typing import Any

import numpy as np

__all__ = ['TAG', 'encode', 'decode', 'canonical', 'first_difference']

TAG = '__t'


def _b64(data: bytes) -> str:
    return base64.b64encode(bytes(data)).decode('ascii')


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode('ascii'))


def _is_image(value: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow is in both venvs
        return False
    return isinstance(value, Image.Image)


def encode(value: Any) -> Any:
    """The exact JSON-able form of ``value`` (see the module docstring)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, np.generic):
        return value
    if isinstance(value, float) and not isinstance(value, np.generic):
        if math.isfinite(value):
            return value
        return {TAG: 'float', 'v': repr(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {TAG: 'bytes', 'b64': _b64(bytes(value))}
    if isinstance(value, decimal.Decimal):
        return {TAG: 'decimal', 'v': str(value)}
    if isinstance(value, np.ndarray):
        arr = value.astype(value.dtype.newbyteorder('<'), copy=False) if value.dtype.byteorder == '>' else value
        return {TAG: 'ndarray', 'dtype': arr.dtype.name, 'shape': list(arr.shape), 'b64': _b64(arr.tobytes())}
    if isinstance(value, np.generic):
        return {TAG: 'npscalar', 'dtype': value.dtype.name, 'b64': _b64(np.asarray(value).astype(
            value.dtype.newbyteorder('<')).tobytes())}
    if _is_image(value):
        return {TAG: 'image', 'mode': value.mode, 'size': list(value.size), 'format': value.format,
                'b64': _b64(value.tobytes())}
    if isinstance(value, tuple):
        return {TAG: 'tuple', 'v': [encode(x) for x in value]}
    if isinstance(value, list):
        return [encode(x) for x in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and TAG not in value:
            return {k: encode(v) for k, v in value.items()}
        return {TAG: 'dict', 'items': [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f'compat.tagged cannot encode a {type(value).__module__}.{type(value).__name__}: {value!r}')


def decode(obj: Any) -> Any:
    """Rebuild the Python value of an :func:`encode` form (images come back as plain ``Image.frombytes``)."""
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    tag = obj.get(TAG)
    if tag is None:
        return {k: decode(v) for k, v in obj.items()}
    if tag == 'float':
        return float(obj['v'])
    if tag == 'bytes':
        return _unb64(obj['b64'])
    if tag == 'decimal':
        return decimal.Decimal(obj['v'])
    if tag == 'ndarray':
        dtype = np.dtype(obj['dtype']).newbyteorder('<')
        return np.frombuffer(_unb64(obj['b64']), dtype=dtype).reshape(obj['shape']).copy()
    if tag == 'npscalar':
        return np.frombuffer(_unb64(obj['b64']), dtype=np.dtype(obj['dtype']).newbyteorder('<'))[0]
    if tag == 'image':
        from PIL import Image
        return Image.frombytes(obj['mode'], tuple(obj['size']), _unb64(obj['b64']))
    if tag == 'tuple':
        return tuple(decode(x) for x in obj['v'])
    if tag == 'dict':
        return {decode(k): decode(v) for k, v in obj['items']}
    raise ValueError(f'compat.tagged: unknown tag {tag!r}')


def canonical(encoded: Any) -> str:
    """The text two encoded values are compared by (key order does not matter, types do)."""
    return json.dumps(encoded, sort_keys=True, allow_nan=False)


def first_difference(actual: Any, expected: Any, path: str = '') -> str | None:
    """A short description of where two encoded values first differ, or None when they are equal."""
    if type(actual) is not type(expected):
        return f'{path or "<root>"}: {type(actual).__name__} {_short(actual)} != {type(expected).__name__} ' \
               f'{_short(expected)}'
    if isinstance(actual, dict):
        for key in sorted(set(actual) | set(expected)):
            if key not in actual or key not in expected:
                return f'{path}/{key}: present only in {"expected" if key in expected else "actual"}'
            diff = first_difference(actual[key], expected[key], f'{path}/{key}')
            if diff:
                return diff
        return None
    if isinstance(actual, list):
        if len(actual) != len(expected):
            return f'{path}: length {len(actual)} != {len(expected)}'
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            diff = first_difference(a, e, f'{path}[{i}]')
            if diff:
                return diff
        return None
    return None if actual == expected else f'{path or "<root>"}: {_short(actual)} != {_short(expected)}'


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + '...'
