"""The XSV column encodings ``str``, ``int`` and ``float`` (spec 4.4): text in, text out, types checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming_core.plugin_api import ColumnTypeError, ShardCorruptError

__all__ = ['XSV_ENCODINGS', 'xsv_encode', 'xsv_decoder']

#: Encoding name -> the Python type it takes (``bool`` passes as ``int``; an ``int`` is not a ``float``).
XSV_ENCODINGS: dict[str, type] = {'str': str, 'int': int, 'float': float}


def xsv_encode(name: str, encoding: str, value: Any) -> str:
    """The text of one value: the string itself, or ``str(int(value))`` / ``str(float(value))``.

    The conversion writes a ``bool`` (or another ``int`` subclass, whose ``str`` may not be a number) as the
    integer it equals: ``True`` is written ``1`` and reads back as ``1``.
    """
    if not isinstance(value, XSV_ENCODINGS[encoding]):
        hint = ' (an int is not a float; convert it with float())' if encoding == 'float' and isinstance(value, int) \
            else ''
        raise ColumnTypeError(f'Column {name!r} is declared {encoding!r}, but the value is {type(value).__name__}: '
                         f'{value!r:.60}.{hint}')
    if encoding == 'str':
        return value
    return str(int(value) if encoding == 'int' else float(value))


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    return float(text)


def xsv_decoder(encoding: str, path: str) -> Callable[[str], Any]:
    """The function turning a field's text into its value (errors name ``path``)."""
    if encoding == 'str':
        return str
    convert = {'int': _int, 'float': _float}[encoding]

    def decode(text: str) -> Any:
        try:
            return convert(text)
        except ValueError as err:
            raise ShardCorruptError(f'{path}: field {text!r:.40} is not a valid {encoding}.') from err

    return decode
