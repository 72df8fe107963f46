"""Converters: JSON lines, CSV, Parquet and image folders into streaming datasets (MDS by default).

Each ``convert_*`` function is also a ``streaming convert <kind>`` subcommand. All of them take the options of
:func:`~streaming_core.tools.convert.runner.convert_source`: ``columns``, ``format``, ``compression``, ``hashes``,
``size_limit``, ``workers`` (parallel partitions merged in source order), ``exist_ok``, ``progress``,
``keep_local``, ``storage_options`` and ``writer_options``; they return a
:class:`~streaming_core.tools.convert.runner.ConvertResult`.

Third-party converters (CIFAR-10, ImageNet, ...) add ``streaming convert <name>`` subcommands through entry points
in the group ``streaming_core.converters`` (see :mod:`streaming_core.tools.convert.discovery`).

For Spark DataFrames, see :func:`streaming_core.tools.spark.dataframe_to_mds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streaming_core.tools.convert.columns import parse_columns
from streaming_core.tools.convert.runner import ConversionError, ConvertResult, convert_source

__all__ = ['convert_jsonl', 'convert_csv', 'convert_parquet', 'convert_imagefolder', 'convert_source',
           'parse_columns', 'ConvertResult', 'ConversionError']


def convert_jsonl(src: str, out: str | Sequence[str], **options: Any) -> ConvertResult:
    """Convert JSON lines (a file, a directory of ``.jsonl``/``.json``/``.ndjson`` files, optionally ``.gz``,
    ``.bz2``, ``.xz`` or ``.zst`` compressed, or a glob) into a dataset at ``out``.

    Column encodings are inferred from the first 1000 records unless given (see
    :mod:`streaming_core.tools.convert.columns`).
    """
    from streaming_core.tools.convert.text import JSONLSource
    return convert_source(JSONLSource(src), out, **options)


def convert_csv(src: str, out: str | Sequence[str], *, delimiter: str | None = None,
                **options: Any) -> ConvertResult:
    """Convert CSV files with a header line (``.csv``/``.tsv``, optionally compressed) into a dataset at ``out``.

    Args:
        src: A file, a directory or a glob.
        out: A local directory, a remote URL or a ``(local, remote)`` pair.
        delimiter: The field separator (default ``,``, or a tab for ``.tsv`` files).
        **options: As for :func:`~streaming_core.tools.convert.runner.convert_source`.
    """
    from streaming_core.tools.convert.text import CSVSource
    return convert_source(CSVSource(src, delimiter=delimiter), out, **options)


def convert_parquet(src: str, out: str | Sequence[str], **options: Any) -> ConvertResult:
    """Convert Parquet files (a file, a directory searched recursively, or a glob) into a dataset at ``out``;
    encodings follow the Arrow types (see :mod:`streaming_core.tools.convert.parquet`)."""
    from streaming_core.tools.convert.parquet import ParquetSource
    return convert_source(ParquetSource(src), out, **options)


def convert_imagefolder(src: str, out: str | Sequence[str], **options: Any) -> ConvertResult:
    """Convert an image tree ``SRC/<class>/<image>`` into ``image``/``label``/``label_name``/``path`` samples,
    storing the original image bytes (see :mod:`streaming_core.tools.convert.imagefolder`)."""
    from streaming_core.tools.convert.imagefolder import ImageFolderSource
    return convert_source(ImageFolderSource(src), out, **options)
