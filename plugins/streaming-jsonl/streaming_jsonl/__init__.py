"""The JSON-lines shard format for streaming-core: ``from streaming_jsonl import JSONWriter``."""

__all__ = ['JSONWriter']


def __getattr__(name: str):
    # The writers (and the core writer machinery) load on first use: reading a dataset never needs them.
    if name in __all__:
        from streaming_jsonl import writer
        return getattr(writer, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
    return __all__
