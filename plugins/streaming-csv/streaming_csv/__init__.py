"""The CSV, TSV and XSV shard formats for streaming-core: ``from streaming_csv import CSVWriter, TSVWriter,
XSVWriter``.
"""

__all__ = ['CSVWriter', 'TSVWriter', 'XSVWriter']


def __getattr__(name: str):
    # The writers (and the core writer machinery) load on first use: reading a dataset never needs them.
    if name in __all__:
        from streaming_csv import writer
        return getattr(writer, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return __all__
