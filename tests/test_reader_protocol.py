"""The core reads a shard reader only through the :class:`~streaming_core.machinery.protocols.ShardReader` Protocol.

A stream whose ``get_shards`` returns strict proxies (every attribute outside the Protocol refused and recorded)
is read end to end: construction with a cache limit, preparation of a remote copy with decompression, shuffled
iteration, random access and eviction. Any new read of a reader attribute the Protocol does not declare fails
here; attributes the core attaches to readers from outside are recorded and must stay within the known list.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest

from streaming_core import Stream, StreamingDataset
from streaming_core.machinery.protocols import ShardReader, ShardView
from streaming_core.reading.catalogue import CatalogueReaders
from streaming_core.reading.shard_manager import ShardManager
from tests.fixtures.data import ids_of, sample, write_mds

#: What the Protocol declares, plus the optional members it documents (the positioned read, the format's name).
OPTIONAL = {'read_sample', 'format_name'}
DECLARED = {'samples', 'parts', 'compression', 'where', 'max_size', 'open', *OPTIONAL}
#: Attributes set on readers from outside (none: the shard manager keeps its own per-shard state).
KNOWN_ATTACHED: set[str] = set()


class StrictReader:
    """Forwards only the Protocol's members to the real reader; records any other read or any write."""

    def __init__(self, reader: Any, log: dict[str, set[str]]) -> None:
        object.__setattr__(self, '_reader', reader)
        object.__setattr__(self, '_log', log)

    def __getattr__(self, name: str) -> Any:
        if name in DECLARED:
            return getattr(self._reader, name)
        self._log['read'].add(name)
        raise AttributeError(f'{name!r} is not part of the ShardReader Protocol')

    def __setattr__(self, name: str, value: Any) -> None:
        self._log['attached'].add(name)
        object.__setattr__(self, name, value)


def test_the_protocol_declares_what_the_base_reader_provides():
    hints = typing.get_type_hints(ShardReader)
    assert {'samples', 'parts', 'compression', 'where'} <= set(hints)
    assert isinstance(ShardReader.__dict__['max_size'], property) and callable(ShardReader.open)
    assert DECLARED - OPTIONAL <= {*hints, *vars(ShardReader)}
    assert all(name in (ShardReader.__doc__ or '') for name in OPTIONAL)  # documented there


def test_the_core_types_readers_and_views_with_the_protocols():
    assert typing.get_type_hints(ShardManager.view)['return'] is ShardView
    assert typing.get_type_hints(ShardManager.open)['return'] is ShardView
    assert CatalogueReaders.__orig_bases__[0].__args__ == (ShardReader,)  # type: ignore[attr-defined]


def test_the_core_reads_readers_only_through_the_protocol(tmp_path):
    log: dict[str, set[str]] = {'read': set(), 'attached': set()}

    class StrictStream(Stream):
        def get_shards(self, world: Any = None, allow_unsafe_types: bool = False) -> list[Any]:
            return [StrictReader(reader, log) for reader in super().get_shards(world, allow_unsafe_types)]

    remote = write_mds(str(tmp_path / 'remote'), 60, compression='zstd', size_limit=1 << 9)
    stream = StrictStream(remote=remote, local=str(tmp_path / 'local'))
    dataset = StreamingDataset(streams=[stream], batch_size=4, shuffle=True, num_canonical_nodes=1,
                               cache_limit=1 << 20)
    assert all(isinstance(reader, StrictReader) for reader in dataset.shards)
    assert sorted(ids_of(dataset)) == list(range(60))
    assert dataset[17] == sample(17) and dataset[59] == sample(59)
    dataset.evict_shard(0)
    assert dataset[0] == sample(0)
    assert not log['read'], f'the core read reader attributes outside the Protocol: {sorted(log["read"])}'
    assert log['attached'] <= KNOWN_ATTACHED, f'attributes attached to readers: {sorted(log["attached"])}'


@pytest.mark.parametrize('name', sorted(DECLARED - {'read_sample'}))
def test_a_first_party_reader_has_every_declared_member(mds_dir, name):
    dataset = StreamingDataset(local=mds_dir(10), batch_size=2)
    assert hasattr(dataset.shards[0], name)


def test_a_reader_subclass_without_entry_keys_is_told_to_set_them():
    from streaming_core.plugin_api import ShardReaderBase

    class LinesReader(ShardReaderBase):
        format_name = 'lines'

    entry = {'version': 2, 'format': 'lines', 'samples': 1, 'compression': None, 'hashes': [],
             'raw_data': {'basename': 'a.lines', 'bytes': 2, 'hashes': {}}, 'zip_data': None}
    with pytest.raises(TypeError, match=r'LinesReader .* sets no entry_keys: set the class attribute entry_keys'):
        LinesReader(entry)
