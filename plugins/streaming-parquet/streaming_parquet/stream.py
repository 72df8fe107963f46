""":class:`ParquetStream`: a :class:`~streaming_core.Stream` of Parquet files, with the Parquet index builder's
options as keyword arguments.

It is a convenience over the core's ``Stream(format='parquet', format_options={...})``: ``columns``, ``split`` (a
Hugging Face split), ``config``, ``data_files`` and ``decode_images`` become the stream's ``format_options``, which
the core hands to :meth:`streaming_parquet.builder.ParquetIndexBuilder.configure` and makes part of the derived
index's identity. The one difference from ``Stream``: here ``split=`` is the Hugging Face split, not a
subdirectory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streaming_core import Stream

__all__ = ['ParquetStream']


class ParquetStream(Stream):
    """A stream of Parquet files (``format='parquet'``) with the Parquet options as arguments.

    Args:
        columns: Read only these columns, in this order: pyarrow reads only their column chunks, the others are
            never decoded. A name the files lack is refused at construction, naming the file and its columns.
        split: A Hugging Face split (``'train'``, ``'validation'``, ``'test'`` or any name): the files are chosen by
            the Hub's layouts (``data/{split}-*.parquet``, ``{config}/{split}/*.parquet``, ``{split}/``, a file or
            directory named with the split). Unlike ``Stream(split=...)`` it is not a subdirectory.
        config: A Hugging Face configuration: only files under that top directory.
        data_files: Glob patterns choosing the files instead (``'data/*.parquet'``, a list, or a ``{split:
            patterns}`` dict from which ``split`` chooses); ``**`` crosses directories.
        decode_images: Return Hugging Face image columns (``{'bytes', 'path'}`` structs) as PIL images.
        **kwargs: Everything :class:`streaming_core.Stream` takes (``remote``, ``local``, ``proportion``,
            ``format_options``...), except ``split`` (see above); ``format`` may only be ``'parquet'``.
    """

    def __init__(self, *, columns: Sequence[str] | None = None, split: str | None = None,
                 config: str | None = None, data_files: str | Sequence[str] | Mapping[str, Any] | None = None,
                 decode_images: bool = False, **kwargs: Any) -> None:
        fmt = kwargs.pop('format', None)
        if fmt not in (None, 'parquet'):
            raise ValueError(f'ParquetStream reads Parquet files: format={fmt!r} is not allowed (leave it out).')
        options = dict(kwargs.pop('format_options', None) or {})
        given = {'split': split, 'config': config,
                 'data_files': list(data_files) if isinstance(data_files, tuple) else data_files,
                 'decode_images': True if decode_images else None}
        for key, value in given.items():
            if value is None:
                continue
            if key in options:
                raise ValueError(f'ParquetStream: `{key}` is given twice (as {key}= and in format_options).')
            options[key] = value
        from streaming_parquet.builder import ParquetIndexBuilder
        super().__init__(format='parquet', columns=columns, format_options=options, **kwargs)
        ParquetIndexBuilder().configure(self.format_options)  # malformed values fail now, not at the first sync

    def __repr__(self) -> str:
        return f'Parquet{super().__repr__()}'
