"""``streaming.base.format.xsv.encodings``: the XSV formats' column types (``str``, ``int``, ``float``)."""

from __future__ import annotations

from typing import Any

from streaming_csv.encodings import XSV_ENCODINGS, xsv_decoder
from streaming_csv.encodings import xsv_encode as _encode

__all__ = ['is_xsv_encoding', 'xsv_decode', 'xsv_encode']


def is_xsv_encoding(encoding: str) -> bool:
    """Whether ``encoding`` is an XSV column type."""
    return encoding in XSV_ENCODINGS


def xsv_encode(encoding: str, value: Any) -> str:
    """The text of ``value`` (type-checked against ``encoding``)."""
    return _encode('value', encoding, value)


def xsv_decode(encoding: str, value: str) -> Any:
    """The value of the text ``value``."""
    return xsv_decoder(encoding, '<value>')(value)
