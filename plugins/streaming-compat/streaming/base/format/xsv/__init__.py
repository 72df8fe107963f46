"""``streaming.base.format.xsv``: the CSV, TSV and XSV writers and readers (the ``streaming-csv`` plugin's)."""

from __future__ import annotations

from streaming_csv import CSVWriter, TSVWriter, XSVWriter
from streaming_csv.reader import CSVReader, TSVReader, XSVReader

__all__ = ['CSVReader', 'CSVWriter', 'TSVReader', 'TSVWriter', 'XSVReader', 'XSVWriter']
