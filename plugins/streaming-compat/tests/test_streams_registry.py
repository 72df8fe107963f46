"""The reference's custom-stream registry: ``streams_registry.register(name, func=MyStream)`` and
``StreamingDataset(stream_name=..., stream_config=...)``, plus discovery through the reference's entry-point group."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from streaming import Stream, StreamingDataset
from streaming.base.registry_utils import (
    RegistryError,
    construct_from_registry,
    create_registry,
    import_file,
    save_registry,
)
from streaming.base.stream import streams_registry


class TaggedStream(Stream):
    """A custom stream with an extra argument."""

    def __init__(self, *, tag: str = 'none', **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tag = tag


def test_default_entry_is_stream() -> None:
    assert streams_registry.get('stream') is Stream
    assert 'stream' in streams_registry
    assert streams_registry.get_all()['stream'] is Stream


def test_register_and_build_through_the_dataset(int_dataset: str) -> None:
    with save_registry():
        streams_registry.register('tagged', func=TaggedStream)
        dataset = StreamingDataset(local=int_dataset, stream_name='tagged', stream_config={'tag': 'mine'},
                                   batch_size=4, download_timeout=30)
        stream = dataset.streams[0]
        assert type(stream) is TaggedStream and stream.tag == 'mine'
        assert stream.download_timeout == 30  # the dataset's stream arguments reach the custom class
        assert [s['id'] for s in dataset[0:3]] == [0, 1, 2]
    assert 'tagged' not in streams_registry  # save_registry restored it


def test_decorator_form_and_register_class() -> None:
    with save_registry():
        @streams_registry.register('decorated')
        class Decorated(Stream):
            pass
        assert streams_registry.get('decorated') is Decorated
        with pytest.raises(TypeError, match='subclass of Stream'):
            streams_registry.register_class('bad', func=dict)
        assert streams_registry.register_class('good', func=Decorated) is Decorated


def test_unknown_name_is_a_value_error(int_dataset: str) -> None:
    with pytest.raises(ValueError, match="Cannot find 'nope' in registry streaming.streams_registry") as info:
        StreamingDataset(local=int_dataset, stream_name='nope')
    assert isinstance(info.value, RegistryError)
    assert 'Registered names: stream' in str(info.value)


def test_a_registered_non_stream_is_refused(int_dataset: str) -> None:
    with save_registry():
        streams_registry.register('func', func=lambda **kw: None)
        with pytest.raises(TypeError, match='not a subclass of streaming.Stream'):
            StreamingDataset(local=int_dataset, stream_name='func')


def test_streams_given_ignore_stream_name(int_dataset: str) -> None:
    dataset = StreamingDataset(streams=[Stream(local=int_dataset)], stream_name='anything', batch_size=4)
    assert type(dataset.streams[0]) is Stream


def test_construct_from_registry_and_find() -> None:
    registry = create_registry('streaming', 'test_things', generic_type=object, description='things')

    def make(a: int = 1, b: int = 2) -> int:
        return a + b

    registry.register('make', func=make)
    assert construct_from_registry('make', registry, partial_function=False, kwargs={'a': 5}) == 7
    assert construct_from_registry('make', registry, kwargs={'a': 5})() == 7
    assert registry.find('make')['module'] == __name__
    with pytest.raises(ValueError, match='subclass of Stream'):
        construct_from_registry('make', registry, pre_validation_function=Stream)


def test_import_file_runs_registrations(tmp_path: Any) -> None:
    path = tmp_path / 'my_streams.py'
    path.write_text(textwrap.dedent('''
        from streaming.base.stream import Stream, streams_registry
        class FileStream(Stream):
            pass
        streams_registry.register('from_file', func=FileStream)
    '''))
    with save_registry():
        module = import_file(str(path))
        assert streams_registry.get('from_file') is module.FileStream


def test_entry_point_registration_in_a_fresh_process(tmp_path: Any, int_dataset: str, python: Any) -> None:
    """A package written for the reference publishes its stream in the group ``streaming_streams_registry``."""
    site = tmp_path / 'site'
    (site / 'ep_streams').mkdir(parents=True)
    (site / 'ep_streams' / '__init__.py').write_text(textwrap.dedent('''
        from streaming import Stream
        class EntryPointStream(Stream):
            def __init__(self, *, flavour='plain', **kwargs):
                super().__init__(**kwargs)
                self.flavour = flavour
    '''))
    dist = site / 'ep_streams-1.0.dist-info'
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: ep-streams\nVersion: 1.0\n')
    (dist / 'entry_points.txt').write_text('[streaming_streams_registry]\nep = ep_streams:EntryPointStream\n')
    result = python(textwrap.dedent(f'''
        from streaming import StreamingDataset
        from streaming.base.stream import streams_registry
        assert 'ep' in streams_registry
        ds = StreamingDataset(local={int_dataset!r}, stream_name='ep', stream_config={{'flavour': 'spicy'}},
                              batch_size=4)
        print(type(ds.streams[0]).__name__, ds.streams[0].flavour, ds[5]['id'])
    '''), env={'PYTHONPATH': str(site)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['EntryPointStream', 'spicy', '5']
