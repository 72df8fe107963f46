""":class:`ParquetStream`: a :class:`~streaming_core.Stream` of Parquet files with a column projection, Hugging Face
split selection or glob patterns, and decoded images.

The core's ``Stream`` knows ``format=`` but not these options, so a ``ParquetStream`` carries them in a configured
index builder (:class:`~streaming_parquet.builder.ParquetIndexBuilder`) registered under a name that spells the
configuration (``parquet[columns=id,text;split=train]``) and used as the stream's ``format``. That name is part of
the derived index's identity, so two configurations never share an index; the registration is renewed whenever the
stream's format is read (a DataLoader worker, a forked or spawned process, a reset plugin host).

A configured builder matches files only while its own stream brings its index up to date (in that thread): at any
other time its ``patterns`` are empty, so it never makes another stream's format detection ambiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from streaming_core import Stream
from streaming_core.plugin_api import get_registry
from streaming_parquet.builder import ParquetIndexBuilder

__all__ = ['ParquetStream']

_PLUGIN = 'parquet'


_ARMED = threading.local()


class _ConfiguredBuilder(ParquetIndexBuilder):
    """A :class:`ParquetIndexBuilder` whose files match only while a stream of its configuration is armed (in that
    thread): any registered builder of the same name serves an armed stream."""

    @property  # type: ignore[override]
    def patterns(self) -> tuple[str, ...]:
        """``('*.parquet',)`` while a stream of this configuration syncs its index, else nothing."""
        return ('*.parquet',) if getattr(_ARMED, 'names', {}).get(self.name) else ()


@contextmanager
def _armed(name: str) -> Iterator[None]:
    """Let the configured builder ``name`` match ``*.parquet`` files in this thread for the duration."""
    names = getattr(_ARMED, 'names', None)
    if names is None:
        names = _ARMED.names = {}
    names[name] = names.get(name, 0) + 1
    try:
        yield
    finally:
        names[name] -= 1
        if not names[name]:
            del names[name]


class ParquetStream(Stream):
    """A stream of Parquet files with options the core's ``Stream`` does not have.

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
            ``download_timeout``...), except ``split`` (see above) and ``format`` (always Parquet).
    """

    def __init__(self, *, columns: Sequence[str] | None = None, split: str | None = None,
                 config: str | None = None, data_files: str | Sequence[str] | Mapping[str, Any] | None = None,
                 decode_images: bool = False, **kwargs: Any) -> None:
        fmt = kwargs.pop('format', None)
        if fmt not in (None, 'parquet'):
            raise ValueError(f'ParquetStream reads Parquet files: format={fmt!r} is not allowed (leave it out).')
        self._builder = _ConfiguredBuilder(columns=columns, split=split, config=config, data_files=data_files,
                                            decode_images=decode_images)
        super().__init__(**kwargs)

    @property
    def format(self) -> str:  # type: ignore[override]
        """The name of this stream's configured Parquet index builder (registered on every read)."""
        name = self._builder.name
        registry = get_registry('index_builder')
        if name not in registry:
            registry.add(name, self._builder, plugin=_PLUGIN, override=True)
        return name

    @format.setter
    def format(self, value: str | None) -> None:
        """Ignore the core's assignments (``None`` or ``'parquet'``, the dataset's default format)."""

    def fetch_index(self) -> str:
        """See :meth:`streaming_core.Stream.fetch_index` (with this stream's builder armed)."""
        with _armed(self.format):
            return super().fetch_index()

    def shard_table(self, *args: Any, **kwargs: Any) -> Any:
        """See :meth:`streaming_core.Stream.shard_table` (with this stream's builder armed)."""
        with _armed(self.format):
            return super().shard_table(*args, **kwargs)

    @property
    def columns(self) -> list[str] | None:
        """The projected columns (``None``: all)."""
        return self._builder.columns

    def __repr__(self) -> str:
        return f'Parquet{super().__repr__()[:-1]}, format={self._builder.name!r})'
