"""``StreamingDataset``'s constructor arguments: their checks, the streams they build, and the cache limit they allow.

:class:`~streaming_core.reading.dataset.StreamingDataset` calls these in its constructor, in this order: the checks
of the arguments that need no index (:func:`check_run_arguments`, after the order arguments), the streams it reads
(:func:`build_streams`: copies of the ``Stream`` objects given, or one stream from ``remote``/``local``, with the
dataset-level defaults applied), and, once the indexes are loaded, the cache limit they leave room for
(:func:`check_cache_limit`). The order arguments themselves are checked by
:class:`~streaming_core.ordering.order_config.OrderConfig`.
"""

from __future__ import annotations

import copy
import numbers
import os
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from streaming_core.errors import CacheLimitError
from streaming_core.ordering.world import World
from streaming_core.reading.catalogue import ShardCatalogue
from streaming_core.reading.stream import Stream, merge_format_options

__all__ = ['check_run_arguments', 'build_streams', 'check_cache_limit', 'index_bytes', 'stream_class',
           'TransformAttribute', 'LengthAttribute']


def check_run_arguments(predownload: int | None, world: World | None, on_bad_sample: str,
                        transform: Callable[[Any], Any] | None) -> None:
    """Check ``predownload``, ``world``, ``on_bad_sample`` and ``transform``, naming the argument.

    Raises:
        ValueError: ``predownload`` is not a non-negative integer, or ``on_bad_sample`` is neither ``'raise'`` nor
            ``'replace'``.
        TypeError: ``world`` is not a :class:`~streaming_core.ordering.world.World`, or ``transform`` is not
            callable.
    """
    if predownload is not None and (not isinstance(predownload, numbers.Integral) or predownload < 0):
        raise ValueError(f'`predownload` must be a non-negative integer, got {predownload!r}.')
    if world is not None and not isinstance(world, World):
        raise TypeError(f'`world` must be a streaming_core.World, got {type(world).__name__}.')
    if on_bad_sample not in ('raise', 'replace'):
        raise ValueError(f"`on_bad_sample` must be 'raise' or 'replace', got {on_bad_sample!r}.")
    if transform is not None and not callable(transform):
        raise TypeError(f'`transform` must be a callable applied to each sample, got {type(transform).__name__}.')


def build_streams(streams: Sequence[Stream] | None, stream_cls: Callable[..., Stream], *, remote: str | None,
                  local: str | None, split: str | None, download_retry: int, download_timeout: float,
                  validate_hash: str | None, keep_zip: bool, stream_config: Mapping[str, Any] | None,
                  storage_options: Mapping[str, Any] | None, format: str | None, columns: Sequence[str] | None,
                  format_options: Mapping[str, Any] | None) -> list[Stream]:
    """The dataset's own streams, with the dataset-level arguments applied as defaults (a stream's own values win).

    The ``Stream`` objects given are inputs (shared by train and val, reused by a rebuilt dataset): the dataset works
    on copies of them, never on them. Without ``streams``, one stream of class ``stream_cls`` is built from
    ``remote``, ``local`` and the download arguments, updated by ``stream_config``.

    Raises:
        TypeError: ``streams`` holds something that is not a ``Stream``, or ``format_options`` is not a mapping of
            names to JSON values.
        ValueError: ``columns`` is malformed, or given both as ``columns`` and in ``format_options``.
    """
    if streams:
        for stream in streams:
            if not isinstance(stream, Stream):
                raise TypeError(f'`streams` must hold Stream objects, got {type(stream).__name__}.')
        own = [copy.copy(stream) for stream in streams]
    else:
        given = {'remote': remote, 'local': local, 'split': split, 'download_retry': download_retry,
                 'download_timeout': download_timeout, 'validate_hash': validate_hash, 'keep_zip': keep_zip}
        own = [stream_cls(**{**{name: value for name, value in given.items() if value is not None},
                             **dict(stream_config or {})})]
    defaults = {'split': split, 'download_retry': download_retry, 'download_timeout': download_timeout,
                'validate_hash': validate_hash, 'keep_zip': keep_zip, 'storage_options': storage_options,
                'format': format,
                'format_options': merge_format_options(format_options, columns, 'StreamingDataset')}
    for stream in own:
        stream.apply_default(defaults)
    _check_shared_locals(own)
    return own


def _check_shared_locals(streams: Sequence[Stream]) -> None:
    """Refuse streams of one dataset that share a local directory but read different data: the stream with a remote
    would take the directory for its cache and replace files of the other's (a directory read in place has no remote,
    or a remote that is the directory itself). Streams of the same remote and local (two views of one dataset) are
    fine.

    Raises:
        ValueError: naming the two streams and the directory.
    """
    from streaming_core.reading.cache_record import is_in_place, remote_key
    seen: dict[str, tuple[int, str, Stream]] = {}
    for i, stream in enumerate(streams):
        local = os.path.realpath(stream.local_dir)
        remote = stream.remote_dir
        key = remote_key(remote if remote and not is_in_place(remote, local) else local)
        first = seen.setdefault(local, (i, key, stream))
        if first[1] != key:
            raise ValueError(
                f'Streams {first[0]} ({first[2]!r}) and {i} ({stream!r}) share the local directory {local} but read '
                f'different data: one local directory holds one dataset (a copy of one remote, or data read in '
                f'place), and sharing it would replace the files of one with the other\'s. Give each stream its own '
                f'`local`.')


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def index_bytes(streams: Sequence[Stream]) -> int:
    """The bytes the streams' index files occupy in the cache (an absent file counts 0)."""
    return sum(_file_size(stream.index_path()) for stream in streams)


def check_cache_limit(limit: int, streams: Sequence[Stream], catalogue: ShardCatalogue) -> None:
    """Refuse a ``cache_limit`` below what the dataset needs at once: the index files, the local-only shards (never
    evicted) and the largest shard; warn below four times the largest shard (shards would be downloaded again).

    Raises:
        CacheLimitError: the limit is too low, naming the bytes it must reach and what they are made of.
    """
    limit = int(limit)
    needed_for_indexes = index_bytes(streams)
    sizes = catalogue.max_size_per_shard  # arrays: no reader is created
    largest = int(sizes.max(initial=0))
    local_only = np.array([not stream.has_remote_copy for stream in streams], dtype=bool)
    pinned = int(sizes[local_only[catalogue.stream_per_shard]].sum())
    need = max(needed_for_indexes + pinned + largest, needed_for_indexes + 1)
    if limit < need:
        lead = (f'Minimum cache usage ({needed_for_indexes} bytes, the index files) leaves no room under the cache '
                f'limit ({limit} bytes)' if limit <= needed_for_indexes else f'Cache limit ({limit} bytes) is too low')
        raise CacheLimitError(
            f'{lead}: it must be at least {need} bytes (the index files {needed_for_indexes} + local-only shards '
            f'that are never evicted {pinned} + the largest shard {largest}). Four times the largest shard or more '
            f'avoids re-downloads.')
    if limit < needed_for_indexes + pinned + 4 * largest:
        warnings.warn(f'cache_limit {limit} is below four times the largest shard ({largest} bytes): shards may '
                      f'be evicted and downloaded again while the epoch needs them.', stacklevel=3)


def stream_class(name: str) -> type[Stream]:
    """The :class:`Stream` class registered under ``name`` (the ``stream`` kind of the name registry, filled by the
    ``register_streams`` hook; ``'stream'`` is :class:`Stream`), for ``StreamingDataset(stream_name=...)``.

    Raises:
        UnknownMethodError: no stream class is registered under ``name`` (a ``ValueError``, as the reference's
            registry error), listing the registered names.
        TypeError: what is registered is not a subclass of :class:`Stream`.
    """
    from streaming_core.errors import UnknownMethodError, UnknownNameError
    from streaming_core.machinery.lookup import get_registry
    if not isinstance(name, str) or not name:
        raise ValueError(f'`stream_name` must be the name of a registered stream class, got {name!r}.')
    if name == 'stream':
        return Stream  # the builtin, without a registry lookup
    try:
        found: Any = get_registry('stream').get(name)
    except UnknownNameError as err:
        raise UnknownMethodError(f'stream_name={name!r}: {err}') from None
    if not (isinstance(found, type) and issubclass(found, Stream)):
        raise TypeError(f'stream_name={name!r} names {found!r}, which is not a subclass of streaming_core.Stream; '
                        f'register a Stream subclass.')
    return found


class LengthAttribute:
    """``dataset.length``: the reference's attribute for ``len(dataset)`` (samples per device per epoch). A subclass
    that assigns ``self.length`` keeps its own value (a non-data descriptor: the instance's attribute wins), and
    ``len(dataset)`` returns it, as the reference's ``__len__`` does."""

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else len(obj)


class TransformAttribute:
    """``dataset.transform``: on a ``StreamingDataset`` itself, the per-sample transform the dataset applies (the
    ``transform=`` argument; assigning it replaces it, as a train/eval switch does). In a subclass, ``self.transform``
    is the subclass's own attribute, which it applies itself (the reference's pattern: its base class has no
    transform), so the base class never applies it again; the base applies only the ``transform=`` argument there.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._base = owner

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        if type(obj) is not self._base and '_own_transform' in obj.__dict__:
            return obj.__dict__['_own_transform']
        return obj.__dict__.get('_sample_transform')

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__['_own_transform' if type(obj) is not self._base else '_sample_transform'] = value
