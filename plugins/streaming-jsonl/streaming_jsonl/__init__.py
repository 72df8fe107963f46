"""The JSON-lines shard format for streaming-core: ``from streaming_jsonl import JSONWriter``."""

from streaming_jsonl.writer import JSONWriter

__all__ = ['JSONWriter']
