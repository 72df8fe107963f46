"""``streaming.base.stream``: :class:`Stream` and the custom-stream registry.

``Stream`` is streaming-core's own class (not a copy), so streams built by either package mix freely.

A custom stream is a subclass of ``Stream`` registered under a name and selected with
``StreamingDataset(stream_name=..., stream_config=...)``::

    from streaming.base.stream import Stream, streams_registry

    class MyStream(Stream):
        def __init__(self, *, my_option=1, **kwargs):
            super().__init__(**kwargs)
            self.my_option = my_option

    streams_registry.register('my_stream', func=MyStream)

A package can also publish it without any import-time code, through the entry-point group
``streaming_streams_registry`` (the reference's group; ``my_stream = "my_package.streams:MyStream"``). Which
methods a custom stream may override is in the migration guide (docs/migrating.md, "Custom streams").
"""

from __future__ import annotations

from streaming.base.registry_utils import create_registry
from streaming_core.reading.stream import Stream

__all__ = ['Stream', 'streams_registry']

#: Stream classes by name; ``'stream'`` is :class:`Stream`. ``StreamingDataset(stream_name=...)`` looks names up here.
streams_registry = create_registry('streaming', 'streams_registry', generic_type=type[Stream], entry_points=True,
                                   description='The streams registry is used for registering Stream classes.',
                                   core_kind='stream')
streams_registry.register('stream', func=Stream)
