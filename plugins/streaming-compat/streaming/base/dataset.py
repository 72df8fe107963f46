"""``streaming.base.dataset``: :class:`StreamingDataset`, streaming-core's dataset with the reference's extras.

It *is* a :class:`streaming_core.StreamingDataset` (a subclass), so ``isinstance`` checks in our loader, our
trainer integrations and users' code hold; it is also a :class:`streaming.base.array.Array`, as in the reference.
What it adds is the reference's registry for the custom-stream selection: without ``streams``, ``stream_name``
picks a class from :data:`streaming.base.stream.streams_registry` and ``stream_config`` gives its extra arguments.
A class registered there is in streaming-core's ``stream`` registry too, and the core builds it; one published only
in the reference's entry-point group is built here, with the same arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from streaming.base.array import Array
from streaming.base.format import Reader
from streaming.base.registry_utils import construct_from_registry
from streaming.base.stream import Stream, streams_registry
from streaming_core.reading.dataset import StreamingDataset as _CoreDataset

__all__ = ['StreamingDataset']

#: The dataset arguments that become the single stream's arguments when ``streams`` is not given.
_STREAM_DEFAULTS = ('remote', 'local', 'split', 'download_retry', 'download_timeout', 'validate_hash', 'keep_zip')


class StreamingDataset(_CoreDataset, Array):
    """The reference's ``StreamingDataset`` on streaming-core: every argument of
    :class:`streaming_core.StreamingDataset`, keyword-only, with the same defaults.

    Args:
        stream_name: Without ``streams``: the name of the stream class in
            :data:`~streaming.base.stream.streams_registry` to build the single stream with (default ``'stream'``,
            :class:`~streaming.base.stream.Stream`). Ignored when ``streams`` is given, as in the reference.
        stream_config: Extra keyword arguments of that stream class.
        **kwargs: Every other :class:`streaming_core.StreamingDataset` argument.
    """

    def __init__(self, *, stream_name: str = 'stream', stream_config: Mapping[str, Any] | None = None,
                 **kwargs: Any) -> None:
        if stream_config is not None and not isinstance(stream_config, Mapping):
            raise TypeError(f'`stream_config` must be a dict of the stream class\'s arguments, got '
                            f'{type(stream_config).__name__}.')
        if not kwargs.get('streams') and (kwargs.get('remote') or kwargs.get('local')):
            registered = streams_registry.get(stream_name)  # a RegistryError (ValueError) naming the registry
            if not (inspect.isclass(registered) and issubclass(registered, Stream)):
                raise TypeError(f'stream_name={stream_name!r} names {registered!r} in streams_registry, which is not '
                                f'a subclass of streaming.Stream; register a Stream subclass.')
            if not streams_registry.in_core(stream_name, registered):
                kwargs['streams'] = [build_stream(stream_name, stream_config, kwargs)]
                kwargs.pop('remote', None)
                kwargs.pop('local', None)
                stream_name, stream_config = 'stream', None
        super().__init__(stream_name=stream_name, stream_config=stream_config, **kwargs)

    @property
    def shards(self) -> list[Reader]:  # type: ignore[override]
        """One reader per shard, a ``list`` as in the reference: :class:`streaming.base.format.Reader` over each of
        the dataset's readers, with the reference's reader API (``get_raw_size()``, ``raw_data``, ``get_item(i)`` from
        the local copy...). Built on first use (one object per shard)."""
        built = self.__dict__.get('_reference_shards')
        if built is None:
            catalogue, streams = self.catalogue, self.streams
            readers, built = catalogue.readers, []
            for shard in range(len(readers)):
                index = int(catalogue.stream_per_shard[shard])
                source, stream = catalogue.sources[index], streams[index]
                entry = source.entry(shard - int(catalogue.shard_offset_per_stream[index])) \
                    if hasattr(source, 'entry') else None  # validate() checks it as the reference does
                built.append(Reader(stream.local, stream.split, readers[shard], entry))
            self.__dict__['_reference_shards'] = built
        return built

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop('_reference_shards', None)  # one object per shard need not travel: rebuilt on use
        return state


# Tools that filter keyword arguments by the constructor's signature (training frameworks do) see every argument.
StreamingDataset.__init__.__signature__ = inspect.signature(_CoreDataset.__init__)  # type: ignore[attr-defined]


def build_stream(stream_name: str, stream_config: Mapping[str, Any] | None, dataset_kwargs: Mapping[str, Any]) -> Any:
    """The single stream of a dataset built without ``streams``: the registered class of ``stream_name`` called with
    the dataset's stream arguments (``remote``, ``local``, ``split``, ``download_retry`` ...) and ``stream_config``."""
    defaults = {name: dataset_kwargs[name] for name in _STREAM_DEFAULTS if dataset_kwargs.get(name) is not None}
    return construct_from_registry(stream_name, streams_registry, partial_function=False,
                                   kwargs={**defaults, **dict(stream_config or {})})
