"""``streaming.base.format.xsv.reader``: the reference's module path, kept for imports written against it."""

from __future__ import annotations

from streaming_csv.reader import CSVReader, TSVReader, XSVReader

__all__ = ['CSVReader', 'TSVReader', 'XSVReader']
