"""``streaming.base.format.xsv.writer``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_csv import CSVWriter, TSVWriter, XSVWriter

__all__ = ['CSVWriter', 'TSVWriter', 'XSVWriter']
