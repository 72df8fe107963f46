"""The CSV, TSV and XSV shard formats for streaming-core: ``from streaming_csv import CSVWriter, TSVWriter,
XSVWriter``.
"""

from streaming_csv.writer import CSVWriter, TSVWriter, XSVWriter

__all__ = ['CSVWriter', 'TSVWriter', 'XSVWriter']
